//! `cargo xtask tidy`: architecture invariants read from the sources, which also run as ordinary
//! tests under `cargo test --workspace`:
//! - crate layering ([`layering`]): a crate depends only on crates below it;
//! - module cycles ([`module_cycles`]): the modules of one parent, at every depth, depend in one
//!   direction;
//! - file length ([`file_length`]): no source file over 800 lines.

mod file_length;
mod layering;
mod module_cycles;

use std::path::Path;

use anyhow::{Result, bail};

/// Violations that existed when their rule was added, each the start of its message: tolerated
/// until fixed. An entry that matches no violation any more is itself reported, so that the list
/// only shrinks.
const KNOWN_VIOLATIONS: &[&str] = &[];

/// Runs every check over the workspace and fails naming each violation.
pub fn run() -> Result<()> {
    let reported = unexplained(&violations(&crate::workspace_root())?, KNOWN_VIOLATIONS);
    for violation in &reported {
        eprintln!("tidy: {violation}");
    }
    if !reported.is_empty() {
        bail!(
            "{} tidy violation(s); the crate layering is {}",
            reported.len(),
            layering::LAYERS.join(" < ")
        );
    }
    eprintln!(
        "tidy: ok (crate layering {}, no module cycles, no file over {} lines)",
        layering::LAYERS.join(" < "),
        file_length::MAX_LINES
    );
    Ok(())
}

/// Every violation of every check, each message starting with its check's name.
fn violations(root: &Path) -> Result<Vec<String>> {
    let checks = [
        ("crate layering", layering::violations(root)?),
        ("module cycles", module_cycles::violations(root)?),
        ("file length", file_length::violations(root)?),
    ];
    Ok(checks
        .into_iter()
        .flat_map(|(check, found)| found.into_iter().map(move |v| format!("{check}: {v}")))
        .collect())
}

/// The violations in `found` that `known` (see [`KNOWN_VIOLATIONS`]) does not list, and one
/// message for each entry of `known` that matches none of them.
fn unexplained(found: &[String], known: &[&str]) -> Vec<String> {
    let listed = |v: &String| known.iter().any(|k| v.starts_with(k));
    let stale = known
        .iter()
        .filter(|k| !found.iter().any(|v| v.starts_with(*k)))
        .map(|k| format!("fixed, so remove it from KNOWN_VIOLATIONS (xtask/src/tidy/mod.rs): {k}"));
    found
        .iter()
        .filter(|v| !listed(v))
        .cloned()
        .chain(stale)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_tidy() {
        let reported = unexplained(
            &violations(&crate::workspace_root()).unwrap(),
            KNOWN_VIOLATIONS,
        );
        assert!(reported.is_empty(), "{}", reported.join("\n"));
    }

    #[test]
    fn known_violations_are_tolerated_and_fixed_ones_must_leave_the_list() {
        let found = vec!["file length: a.rs has 900 lines".to_string()];
        assert!(unexplained(&found, &["file length: a.rs"]).is_empty());
        assert_eq!(unexplained(&found, &[]), found);
        let stale = unexplained(&[], &["file length: a.rs"]);
        assert_eq!(stale.len(), 1);
        assert!(stale[0].starts_with("fixed, so remove it from KNOWN_VIOLATIONS"));
    }
}
