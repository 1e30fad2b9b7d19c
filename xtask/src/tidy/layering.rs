//! Crate layering, read from the manifests: the crates form layers, lowest first (formats,
//! Crate layering, read from the manifests: the crates form layers, lowest first (formats,
//! transformer, kernels, cuda, text, model, serve, cli), and a crate may depend (in any
//! dependency table, dev and build included) only on crates earlier in that list, so file
//! parsing never learns about models, kernels never learn about serving, and the CLI stays a
//! thin front end.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use toml::{Table, Value};

/// The rinfer crates, lowest layer first.
pub const LAYERS: [&str; 8] = [
    "rinfer-formats",
    "rinfer-transformer",
    "rinfer-kernels",
    "rinfer-cuda",
    "rinfer-text",
    "rinfer-model",
    "rinfer-serve",
    "rinfer-cli",
];

/// Every forbidden dependency edge among the workspace's crates, one message each.
pub fn violations(root: &Path) -> Result<Vec<String>> {
    let crates_dir = root.join("crates");
    let mut manifests = Vec::new();
    for entry in fs::read_dir(&crates_dir)
        .with_context(|| format!("cannot list {}", crates_dir.display()))?
    {
        let manifest = entry?.path().join("Cargo.toml");
        if manifest.is_file() {
            manifests.push(manifest);
        }
    }
    manifests.sort();

    let mut violations = Vec::new();
    for manifest in manifests {
        let text = fs::read_to_string(&manifest)
            .with_context(|| format!("cannot read {}", manifest.display()))?;
        let shown = manifest
            .strip_prefix(root)
            .unwrap_or(&manifest)
            .display()
            .to_string();
        violations.extend(
            manifest_violations(&text)
                .with_context(|| format!("in {shown}"))?
                .into_iter()
                .map(|v| format!("{v} (in {shown})")),
        );
    }
    Ok(violations)
}

/// The forbidden rinfer dependencies declared by one manifest.
fn manifest_violations(text: &str) -> Result<Vec<String>> {
    let manifest: Table = text.parse().context("not valid TOML")?;
    let name = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .context("no [package] name")?;
    let Some(level) = layer_of(name) else {
        bail!("crate {name} is not in LAYERS (xtask/src/tidy.rs); place it in the order first");
    };

    let mut tables: Vec<(String, &Table)> = Vec::new();
    for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(table) = manifest.get(kind).and_then(Value::as_table) {
            tables.push((format!("[{kind}]"), table));
        }
    }
    if let Some(targets) = manifest.get("target").and_then(Value::as_table) {
        for (target, spec) in targets {
            for kind in ["dependencies", "dev-dependencies", "build-dependencies"] {
                if let Some(table) = spec.get(kind).and_then(Value::as_table) {
                    tables.push((format!("[target.{target}.{kind}]"), table));
                }
            }
        }
    }

    let mut violations = Vec::new();
    for (section, table) in tables {
        for (key, spec) in table {
            // A renamed dependency names the real crate in `package`.
            let dep = spec.get("package").and_then(Value::as_str).unwrap_or(key);
            if !dep.starts_with("rinfer-") {
                continue;
            }
            match layer_of(dep) {
                Some(dep_level) if dep_level < level => {}
                Some(_) => violations.push(format!(
                    "{name} depends on {dep} in {section}, but {dep} is not below {name}"
                )),
                None => violations.push(format!(
                    "{name} depends on {dep} in {section}, which is not in LAYERS"
                )),
            }
        }
    }
    Ok(violations)
}

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|&layer| layer == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upward_and_sideways_edges_are_reported() {
        let manifest = r#"
            [package]
            name = "rinfer-kernels"
            [dependencies]
            rinfer-formats.workspace = true
            rinfer-model.workspace = true
            [dev-dependencies]
            renamed = { package = "rinfer-serve", path = "../serve" }
            [target.'cfg(unix)'.dependencies]
            rinfer-kernels = { path = "." }
        "#;
        let violations = manifest_violations(manifest).unwrap();
        assert_eq!(violations.len(), 3, "{violations:?}");
        assert!(violations[0].contains("rinfer-model in [dependencies]"));
        assert!(violations[1].contains("rinfer-serve in [dev-dependencies]"));
        assert!(violations[2].contains("rinfer-kernels in [target.cfg(unix).dependencies]"));
    }
}
