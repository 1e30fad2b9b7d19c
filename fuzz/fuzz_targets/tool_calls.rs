//! Any text a model may answer, read back as tool calls in any of rinfer's formats (generic
//! JSON, Hermes/Qwen blocks, Llama 3 JSON, Mistral lists), whole and streamed in pieces of
//! any size, calls only the functions the request declared, keeps an answer without calls as
//! its content, agrees between the whole and streamed answer, and never panics.
//!
//! The first byte picks the format (low two bits) and the streamed piece size (the rest); the
//! remaining bytes are the answer (as UTF-8, lossily). Seeds in `corpus/tool_calls` are
//! answers in each format, whole, cut short, repeated and naming undeclared functions.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rinfer_serve::fuzzing::check_tool_answer;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, answer)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(answer);
    check_tool_answer(&text, selector, usize::from(selector >> 2) + 1);
});
