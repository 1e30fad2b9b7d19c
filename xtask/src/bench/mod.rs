//! `cargo xtask bench <what> [options]`: dispatches on the first argument to one benchmark.

mod serve;

use anyhow::{Result, bail};

/// The benchmarks, as listed in the usage text.
pub const USAGE: &str = "\
  bench serve [--streams 1,4,16] [--max-tokens N]
                aggregate generated tok/s and p50/p99 inter-token latency of `rinfer serve` on
                the default model at several concurrent streams";

/// Runs the benchmark named by `args[0]` with the remaining arguments.
pub fn run(args: &[&str]) -> Result<()> {
    match args {
        ["serve", rest @ ..] => serve::run(rest),
        [] => bail!("which benchmark? expected one of:\n{USAGE}"),
        [other, ..] => bail!("unknown benchmark `{other}`; expected one of:\n{USAGE}"),
    }
}
