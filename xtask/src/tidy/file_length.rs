//! File length: no Rust source file of the workspace (under `crates/`, `xtask/` and `benches/`)
//! is longer than [`MAX_LINES`] lines. A file that long holds more than one purpose: split it.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The most lines a source file may have.
pub const MAX_LINES: usize = 800;

/// The workspace folders whose `.rs` files are checked.
const SOURCE_DIRS: [&str; 3] = ["crates", "xtask", "benches"];

/// Every source file over [`MAX_LINES`], one message each, in path order.
pub fn violations(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        let dir = root.join(dir);
        if dir.is_dir() {
            rust_files(&dir, &mut files)?;
        }
    }
    files.sort();
    let mut violations = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        let lines = text.lines().count();
        if lines > MAX_LINES {
            let shown = file.strip_prefix(root).unwrap_or(&file).display();
            violations.push(format!(
                "{shown} has {lines} lines, over the {MAX_LINES} a source file may have: split it \
                 by purpose"
            ));
        }
    }
    Ok(violations)
}

/// Collects the `.rs` files under `dir`, skipping build outputs (`target`) and hidden folders.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_over_the_limit_are_reported_and_build_outputs_skipped() {
        let root = tempfile::tempdir().unwrap();
        let src = root.path().join("crates/a/src");
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join("long.rs"), "//\n".repeat(MAX_LINES + 1)).unwrap();
        fs::write(src.join("limit.rs"), "//\n".repeat(MAX_LINES)).unwrap();
        let target = root.path().join("crates/a/target");
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("generated.rs"), "//\n".repeat(2 * MAX_LINES)).unwrap();
        let violations = violations(root.path()).unwrap();
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].starts_with("crates/a/src/long.rs has 801 lines"));
    }
}
