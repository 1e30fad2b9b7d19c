//! Any bytes handed to the GGUF header parser give a header or an error, never a panic; every
//! tensor of a header that parses can be found by its name and lies inside the file.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rinfer_formats::gguf::GgufHeader;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = GgufHeader::parse(data) else {
        return;
    };
    let _ = header.architecture();
    for tensor in &header.tensors {
        assert!(header.tensor(&tensor.name).is_some(), "{}", tensor.name);
        let end = header
            .data_offset
            .checked_add(tensor.offset)
            .and_then(|start| start.checked_add(tensor.size));
        assert!(
            end.is_some_and(|end| end <= data.len() as u64),
            "{}",
            tensor.name
        );
    }
});
