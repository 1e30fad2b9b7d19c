//! The model bench's last results on each machine kind, kept in the repository
//! (`docs/bench-history/KIND.json`, one file a kind) so that a run prints, beside its own
//! table, what the same model last measured on this kind and on the other one, each with its
//! CPU, date and commit: speed differs between kinds (an Intel Xeon with AMX against an AMD EPYC
//! without), and a ratio is only comparable with one measured on the same kind.
//!
//! The kind is the CPU's vendor, read from its model name (`/proc/cpuinfo`, as `lscpu` shows
//! it). A file holds, for each model file name, the last run's record: its CPU, date, commit,
//! repetitions and each test's medians, rinfer's and llama.cpp's (`null` when not measured).
//! Each run replaces its model's record on its kind; a record is written whole so that a ratio
//! never mixes two runs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

/// The history's folder, relative to the workspace root.
pub const DIR: &str = "docs/bench-history";
/// The machine kinds, each always shown.
const KINDS: [&str; 2] = ["intel", "amd"];

/// The machine kind of a CPU by its model name: `intel`, `amd`, or `other`.
pub fn machine_kind(cpu: &str) -> &'static str {
    let cpu = cpu.to_ascii_lowercase();
    if cpu.contains("intel") || cpu.contains("xeon") {
        "intel"
    } else if cpu.contains("amd") || cpu.contains("epyc") || cpu.contains("ryzen") {
        "amd"
    } else {
        "other"
    }
}

/// The history kept in one folder.
pub struct History {
    dir: PathBuf,
}

impl History {
    /// The history in `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn file(&self, kind: &str) -> PathBuf {
        self.dir.join(format!("{kind}.json"))
    }

    /// The records of `kind` by model (an empty map when none were kept).
    fn load(&self, kind: &str) -> Result<Map<String, Value>> {
        let path = self.file(kind);
        if !path.is_file() {
            return Ok(Map::new());
        }
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let value: Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        Ok(value["models"].as_object().cloned().unwrap_or_default())
    }

    /// The last record of `model` (a file name) on every kind shown to a run on `this_kind`.
    pub fn last(&self, model: &str, this_kind: &str) -> Result<Vec<(String, Option<Value>)>> {
        let mut kinds: Vec<&str> = KINDS.to_vec();
        if !kinds.contains(&this_kind) {
            kinds.push(this_kind);
        }
        let mut last = Vec::with_capacity(kinds.len());
        for kind in kinds {
            last.push((kind.to_string(), self.load(kind)?.remove(model)));
        }
        Ok(last)
    }

    /// Keeps `record` as the last of `model` on `kind`; returns the file written.
    pub fn save(&self, kind: &str, model: &str, record: Value) -> Result<PathBuf> {
        let mut models = self.load(kind)?;
        models.insert(model.to_string(), record);
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let path = self.file(kind);
        let text = serde_json::to_string_pretty(&json!({"kind": kind, "models": models}))?;
        fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
        Ok(path)
    }
}

/// The model's key in the history: its file name.
pub fn model_key(model: &Path) -> String {
    model.file_name().map_or_else(
        || model.display().to_string(),
        |n| n.to_string_lossy().into(),
    )
}

/// Lines that show each kind's last record beside a run on `this_kind`.
pub fn show_last(last: &[(String, Option<Value>)], this_kind: &str) -> String {
    let mut out = String::from(
        "last recorded on each machine kind (compare only within a kind; rinfer / llama.cpp \
         medians):\n",
    );
    for (kind, record) in last {
        let this = if kind == this_kind { ", this kind" } else { "" };
        let Some(record) = record else {
            out.push_str(&format!("- {kind}{this}: none for this model\n"));
            continue;
        };
        let text = |key: &str| record[key].as_str().unwrap_or("?").to_string();
        let results: Vec<String> = record["results"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(show_result)
            .collect();
        out.push_str(&format!(
            "- {kind}{this} ({}, {}, commit {}, {} reps): {}\n",
            text("cpu"),
            text("date"),
            text("commit"),
            record["reps"],
            results.join("; ")
        ));
    }
    out
}

/// `pp512 t=2: 138.4 / 126.1 tok/s = 1.10`, or without llama.cpp `pp512 t=2: 138.4 tok/s`.
fn show_result(result: &Value) -> String {
    let unit = result["unit"].as_str().unwrap_or("");
    let decimals = if unit == "s" { 3 } else { 1 };
    let value = |key: &str| result[key].as_f64();
    let head = format!(
        "{} t={}:",
        result["test"].as_str().unwrap_or("?"),
        result["threads"]
    );
    match (value("rinfer"), value("llama_cpp")) {
        (Some(ours), Some(theirs)) => format!(
            "{head} {ours:.decimals$} / {theirs:.decimals$} {unit} = {:.2}",
            ours / theirs
        ),
        (Some(ours), None) => format!("{head} {ours:.decimals$} {unit}"),
        _ => format!("{head} –"),
    }
}

/// Today's date (UTC), `YYYY-MM-DD`.
pub fn today() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(seconds / 86_400)
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_date(days: u64) -> String {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The workspace's commit (short), with `+` when tracked files other than the history's have
/// changes; `unknown` without git.
pub fn commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(crate::workspace_root())
            .output()
            .ok()
            .filter(|out| out.status.success())
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => match git(&[
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            &format!(":!{DIR}"),
        ]) {
            Some(changes) if !changes.is_empty() => format!("{head}+"),
            _ => head,
        },
        None => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_cpu_vendor() {
        assert_eq!(
            machine_kind("Intel(R) Xeon(R) Processor @ 2.50GHz"),
            "intel"
        );
        assert_eq!(machine_kind("AMD EPYC 9R45 96-Core Processor"), "amd");
        assert_eq!(machine_kind("Neoverse-V2"), "other");
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_784), "2026-11-27");
    }

    fn run(rinfer: f64, llama_cpp: Option<f64>) -> Value {
        json!({
            "cpu": "Intel(R) Xeon(R)", "date": "2026-11-27", "commit": "abc1234", "reps": 3,
            "results": [
                {"test": "pp512", "unit": "tok/s", "threads": 2, "rinfer": rinfer,
                 "llama_cpp": llama_cpp},
                {"test": "first_token", "unit": "s", "threads": 2, "rinfer": 0.25,
                 "llama_cpp": llama_cpp.map(|_| 0.5)},
            ],
        })
    }

    #[test]
    fn a_run_replaces_its_models_record_on_its_kind_only() {
        let dir = tempfile::tempdir().unwrap();
        let history = History::new(dir.path().join("history"));
        assert!(
            history
                .last("m.gguf", "intel")
                .unwrap()
                .iter()
                .all(|(_, r)| r.is_none())
        );
        history
            .save("intel", "m.gguf", run(100.0, Some(50.0)))
            .unwrap();
        history.save("intel", "other.gguf", run(1.0, None)).unwrap();
        history
            .save("intel", "m.gguf", run(120.0, Some(60.0)))
            .unwrap();
        let last = history.last("m.gguf", "intel").unwrap();
        assert_eq!(last[0].0, "intel");
        assert_eq!(last[0].1.as_ref().unwrap()["results"][0]["rinfer"], 120.0);
        assert_eq!(last[1], ("amd".to_string(), None));
        let other = history.last("other.gguf", "other").unwrap();
        assert_eq!(other.len(), 3, "an unknown kind is shown after both");
        assert!(other[0].1.is_some());
    }

    #[test]
    fn the_lines_name_each_kind_its_machine_and_its_ratios() {
        let last = vec![
            ("intel".to_string(), Some(run(138.4, Some(126.1)))),
            ("amd".to_string(), None),
        ];
        let text = show_last(&last, "amd");
        assert!(
            text.contains(
                "- intel (Intel(R) Xeon(R), 2026-11-27, commit abc1234, 3 reps): pp512 t=2: \
                 138.4 / 126.1 tok/s = 1.10; first_token t=2: 0.250 / 0.500 s = 0.50\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("- amd, this kind: none for this model\n"),
            "{text}"
        );
        let alone = show_last(&[("intel".into(), Some(run(138.4, None)))], "intel");
        assert!(
            alone.contains("pp512 t=2: 138.4 tok/s; first_token t=2: 0.250 s"),
            "{alone}"
        );
    }
}
