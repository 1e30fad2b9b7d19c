//! `cargo xtask bench <what> [options]`: dispatches on the first argument to one benchmark.

mod kernels;

use anyhow::{Result, bail};

/// The benchmarks, as listed in the usage text.
pub const USAGE: &str = "\
  bench kernels [--json] [TYPE...]
                matvec GB/s (1 and 2 threads, vs measured read bandwidth) and matmul GFLOP/s of
                every weight type (or the named ones) at real model shapes";

/// Runs the benchmark named by `args[0]` with the remaining arguments.
pub fn run(args: &[&str]) -> Result<()> {
    match args {
        ["kernels", rest @ ..] => kernels::run(rest),
        [] => bail!("which benchmark? expected one of:\n{USAGE}"),
        [other, ..] => bail!("unknown benchmark `{other}`; expected one of:\n{USAGE}"),
    }
}
