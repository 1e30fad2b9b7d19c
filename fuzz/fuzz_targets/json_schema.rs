//! Any `response_format` handed to `rinfer serve`'s schema compiler is compiled or refused with
//! a 4xx (or a 503 while earlier compiles still run) whose message is not empty: never a
//! panic, a stack overflow or an allocation past the RSS limit. A compile that does not end
//! within the server's deadline is refused too, so a slow schema shows as a refusal, not a
//! libFuzzer timeout; one that the size caps do not stop and that runs for minutes is what
//! `-timeout` is there to find.
//!
//! The input is the JSON of `response_format` (`{"type": "json_schema", "json_schema":
//! {"name": ..., "schema": ...}}`). Seeds in `corpus/json_schema`; the field names of JSON
//! schemas are in `json_schema.dict`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rinfer_serve::fuzzing::compile_response_format;

fuzz_target!(|data: &[u8]| {
    if let Err(refusal) = compile_response_format(data) {
        assert!(
            (400..500).contains(&refusal.status) || refusal.status == 503,
            "status {} for a schema: {}",
            refusal.status,
            refusal.message
        );
        assert!(!refusal.message.is_empty());
    }
});
