//! The default model of the tests that need it, shared by every crate's tests (included by
//! path): `cargo xtask test` resolves it through `rinfer fetch` and passes its path down in
//! `RINFER_TEST_MODEL`, the one place a test reads it.

use std::path::PathBuf;

/// The default model's path.
///
/// # Panics
/// When the variable is unset or names no file, saying how to run the tests.
pub fn default_model() -> PathBuf {
    let path = std::env::var_os("RINFER_TEST_MODEL").map(PathBuf::from).expect(
        "RINFER_TEST_MODEL is unset: run the tests with `cargo xtask test`, or set it to the path `rinfer fetch` prints",
    );
    assert!(path.is_file(), "{} is not a model file", path.display());
    path
}
