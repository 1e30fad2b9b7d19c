//! `cargo xtask fetch-model`: the CLI's own `rinfer fetch`, so the download logic lives once.

use anyhow::Result;

/// Downloads and verifies the default model into the cache (a no-op when already there).
pub fn run() -> Result<()> {
    crate::cargo(&["run", "--quiet", "-p", "rinfer-cli", "--", "fetch"])
}
