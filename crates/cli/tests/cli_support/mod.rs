//! The `rinfer` binary run to its end, and the repository's fixtures, for the tests that drive
//! the command line.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The repository's `tests/fixtures` folder.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// `rinfer ARGS`, run to its end.
pub fn rinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(args)
        .output()
        .expect("the rinfer binary runs")
}

/// Asserts that `out` is a success, showing its stderr where it is not.
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "rinfer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
