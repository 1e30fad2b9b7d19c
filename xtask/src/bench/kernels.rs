//! `cargo xtask bench kernels [--json] [TYPE...]`: runs the kernels crate's benchmark binary
//! (`crates/kernels/benches/kernels`) in release mode, on every weight type or on the named
//! ones. Progress goes to stderr; the table, or with `--json` one JSON object, to stdout.

use anyhow::{Result, bail};

/// Builds and runs the benchmark, passing `--json` and type names through.
pub fn run(args: &[&str]) -> Result<()> {
    let mut cargo = vec![
        "bench",
        "--package",
        "rinfer-kernels",
        "--bench",
        "kernels",
        "--",
    ];
    for &arg in args {
        if arg.starts_with('-') && arg != "--json" {
            bail!("unknown option `{arg}` for `bench kernels` (expected --json or type names)");
        }
        cargo.push(arg);
    }
    crate::cargo(&cargo)
}
