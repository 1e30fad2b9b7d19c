//! Any bytes handed to the safetensors parser give a model or an error, never a panic, and every
//! tensor of a model that parses has exactly the bytes its type and shape need.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rinfer_formats::safetensors::SafetensorsModel;

fuzz_target!(|data: &[u8]| {
    let Ok(model) = SafetensorsModel::from_bytes(data.to_vec()) else {
        return;
    };
    for tensor in model.tensors() {
        let bits = tensor.n_elements() as u128 * tensor.dtype.bits() as u128;
        assert_eq!(tensor.bytes.len() as u128 * 8, bits, "{}", tensor.name);
        assert_eq!(model.tensor(tensor.name).ok(), Some(tensor));
    }
});
