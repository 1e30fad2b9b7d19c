//! The `rinfer` binary run to its end, and the repository's fixtures, for the tests that drive
//! the command line.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

/// The repository's `tests/fixtures` folder.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The path of `relative` in the fixtures, as an argument.
pub fn fixture(relative: &str) -> String {
    fixtures().join(relative).display().to_string()
}

/// `rinfer ARGS`, run to its end.
pub fn rinfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(args)
        .output()
        .expect("the rinfer binary runs")
}

/// `rinfer ARGS` started with `stdin` as its standard input, its output and errors piped.
pub fn spawn_rinfer(args: &[&str], stdin: Stdio) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rinfer"))
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the rinfer binary runs")
}

/// `rinfer ARGS` with `stdin` written to its standard input, run to its end.
pub fn rinfer_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = spawn_rinfer(args, Stdio::piped());
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(stdin)
        .expect("the input is written");
    child.wait_with_output().expect("rinfer runs to its end")
}

/// The error output of a run that failed with exit code 1 (asserted, showing that output).
pub fn failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    stderr
}

/// Asserts that `out` is a success, showing its stderr where it is not.
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "rinfer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
