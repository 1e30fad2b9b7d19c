//! What the serve tests feed the server: fixture paths, the test models, a tool's schema.
//! Shared with the binary's tests in `crates/cli/tests/serve_support`.

#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::Value;

#[path = "../../../../tests/support/default_model.rs"]
mod default_model;

// Only the tests that need the default model use it.
#[allow(unused_imports)]
pub use default_model::default_model;

/// The path of `path` in the repository's `tests/fixtures` folder.
pub fn fixture(path: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
        .display()
        .to_string()
}

/// The JSON schema of the test tool `get_weather`'s arguments.
pub fn weather_schema() -> Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "maxLength": 12},
            "unit": {"enum": ["celsius", "fahrenheit"]}
        },
        "required": ["city", "unit"],
        "additionalProperties": false
    })
}

/// A fixture model: tiny, random weights, a Gemma 3 tokenizer.
pub fn tiny_model() -> String {
    fixture("models/gemma3-tiny-q4_k_m.gguf")
}

/// A fresh directory holding a copy of the tiny Gemma 3 model under each of `names` (each
/// `NAME.gguf`): models of one size, so that a budget can be set in their units.
pub fn models_dir(test: &str, names: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rinfer-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for name in names {
        std::fs::copy(tiny_model(), dir.join(format!("{name}.gguf"))).unwrap();
    }
    dir
}
