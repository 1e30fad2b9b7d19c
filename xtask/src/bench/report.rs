//! The model bench's results: markdown tables for people, one JSON object for programs.

use std::fmt::Write;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::ceiling::Ceiling;
use super::measure::{Sample, Test};
use super::stats::Summary;

/// Every sample of one test at one thread count.
pub struct Row {
    /// The test.
    pub test: Test,
    /// Threads.
    pub threads: usize,
    /// rinfer's samples.
    pub rinfer: Vec<Sample>,
    /// llama.cpp's samples (none unless compared).
    pub llama_cpp: Vec<Sample>,
}

/// A whole run.
pub struct Report {
    /// The model file.
    pub model: PathBuf,
    /// Repetitions of each measurement.
    pub reps: usize,
    /// The llama.cpp measured beside rinfer, if any.
    pub llama_cpp: Option<String>,
    /// The results.
    pub rows: Vec<Row>,
    /// The decode ceiling at each thread count measured.
    pub ceilings: Vec<Ceiling>,
}

fn values(samples: &[Sample]) -> Option<Summary> {
    Summary::of(&samples.iter().map(|s| s.value).collect::<Vec<_>>())
}

fn rss(samples: &[Sample]) -> Option<Summary> {
    Summary::of(&samples.iter().map(|s| s.peak_rss_mib).collect::<Vec<_>>())
}

fn ratio(a: Option<Summary>, b: Option<Summary>) -> Option<f64> {
    Some(a?.median / b?.median)
}

/// The CPU's model name and the cores this process may use.
pub fn machine() -> (String, usize) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map_or("unknown CPU".into(), |(_, name)| name.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    (cpu, cores)
}

impl Report {
    /// The share of the machine other processes used during the measurements.
    fn busy_elsewhere(&self) -> Option<Summary> {
        let rows = self.rows.iter();
        let samples = rows.flat_map(|r| r.rinfer.iter().chain(&r.llama_cpp));
        Summary::of(&samples.map(|s| s.busy_elsewhere).collect::<Vec<_>>())
    }

    /// Markdown: a speed table and a peak memory table.
    pub fn to_markdown(&self) -> String {
        let (cpu, cores) = machine();
        let compared = self.llama_cpp.is_some();
        let mut out = String::new();
        let _ = writeln!(out, "model: {}", self.model.display());
        let kind = super::history::machine_kind(&cpu);
        let _ = writeln!(out, "machine: {cpu} (the {kind} kind), {cores} cores");
        if let Some(busy) = self.busy_elsewhere() {
            let _ = writeln!(
                out,
                "CPU used by other processes during the measurements: {:.0}% ({:.0}–{:.0}%)",
                busy.median * 100.0,
                busy.min * 100.0,
                busy.max * 100.0
            );
        }
        if let Some(llama_cpp) = &self.llama_cpp {
            let _ = writeln!(out, "llama.cpp: {llama_cpp}");
        }
        let _ = writeln!(
            out,
            "{} repetitions, each in a fresh process: median (min–max)\n",
            self.reps
        );
        // The speed table ends with the CPU share other processes took during the row's
        // measurements, in percent: interference explains outliers.
        let header = |out: &mut String, what: &str, others: bool| {
            let _ = write!(out, "| {what} | threads | rinfer |");
            let mut rule = String::from("|---|--:|--:|");
            if compared {
                out.push_str(" llama.cpp | rinfer/llama.cpp |");
                rule.push_str("--:|--:|");
            }
            if others {
                out.push_str(" others' CPU % |");
                rule.push_str("--:|");
            }
            let _ = writeln!(out, "\n{rule}");
        };
        let line = |out: &mut String, name: String, row: &Row, a: Option<Summary>, b, d| {
            let show = |s: Option<Summary>| s.map_or("–".into(), |s| s.show(d));
            let _ = write!(out, "| {name} | {} | {} |", row.threads, show(a));
            if compared {
                let r = ratio(a, b).map_or("–".into(), |r| format!("{r:.2}"));
                let _ = write!(out, " {} | {r} |", show(b));
            }
        };
        header(&mut out, "test", true);
        for row in &self.rows {
            let name = format!("{} ({})", row.test.name(), row.test.unit());
            let decimals = if row.test.unit() == "s" { 3 } else { 1 };
            let (a, b) = (values(&row.rinfer), values(&row.llama_cpp));
            line(&mut out, name, row, a, b, decimals);
            let busy = row.rinfer.iter().chain(&row.llama_cpp);
            let busy: Vec<f64> = busy.map(|s| s.busy_elsewhere * 100.0).collect();
            let busy = Summary::of(&busy).map_or("–".into(), |s| s.show(0));
            let _ = writeln!(out, " {busy} |");
        }
        out.push('\n');
        self.ceiling_table(&mut out);
        header(&mut out, "peak RSS (MiB) of", false);
        for row in &self.rows {
            let (a, b) = (rss(&row.rinfer), rss(&row.llama_cpp));
            line(&mut out, row.test.name(), row, a, b, 0);
            out.push('\n');
        }
        out
    }

    /// Decode as a share of the bandwidth ceiling (see [`super::ceiling`]), per thread count.
    fn ceiling_table(&self, out: &mut String) {
        let Some(first) = self.ceilings.first() else {
            return;
        };
        let _ = writeln!(
            out,
            "decode reads {:.1} MB of weights per token; the ceiling is the read bandwidth over \
             that\n",
            first.bytes_per_token as f64 / 1e6
        );
        let compared = self.llama_cpp.is_some();
        let _ = write!(
            out,
            "| test | threads | read GB/s | ceiling tok/s | rinfer % |"
        );
        let mut rule = String::from("|---|--:|--:|--:|--:|");
        if compared {
            out.push_str(" llama.cpp % |");
            rule.push_str("--:|");
        }
        let _ = writeln!(out, "\n{rule}");
        for row in self
            .rows
            .iter()
            .filter(|r| matches!(r.test, Test::Generate(_)))
        {
            let Some(c) = self.ceilings.iter().find(|c| c.threads == row.threads) else {
                continue;
            };
            let share = |samples: &[Sample]| {
                values(samples).map_or("–".into(), |v| {
                    format!("{:.0}", 100.0 * v.median / c.tokens_per_second())
                })
            };
            let _ = write!(
                out,
                "| {} | {} | {:.1} | {:.1} | {} |",
                row.test.name(),
                row.threads,
                c.bandwidth / 1e9,
                c.tokens_per_second(),
                share(&row.rinfer)
            );
            if compared {
                let _ = write!(out, " {} |", share(&row.llama_cpp));
            }
            out.push('\n');
        }
        out.push('\n');
    }

    /// The run's record for the bench history ([`super::history`]): measured on `cpu` at
    /// `commit` on `date`, each test's medians.
    pub fn record(&self, cpu: &str, date: &str, commit: &str) -> Value {
        let median = |samples: &[Sample]| values(samples).map(|s| s.median);
        let results: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                json!({
                    "test": row.test.name(),
                    "unit": row.test.unit(),
                    "threads": row.threads,
                    "rinfer": median(&row.rinfer),
                    "llama_cpp": median(&row.llama_cpp),
                })
            })
            .collect();
        json!({"cpu": cpu, "date": date, "commit": commit, "reps": self.reps, "results": results})
    }

    /// One JSON object with every summary and the rinfer/llama.cpp ratios of the medians.
    pub fn to_json(&self) -> Value {
        let (cpu, cores) = machine();
        let engine = |samples: &[Sample]| {
            values(samples).map(|v| {
                let mut summary = v.to_json();
                summary["peak_rss_mib"] = rss(samples).map_or(Value::Null, Summary::to_json);
                summary
            })
        };
        let results: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut result = json!({
                    "test": row.test.name(),
                    "unit": row.test.unit(),
                    "higher_is_better": row.test.higher_is_better(),
                    "threads": row.threads,
                    "rinfer": engine(&row.rinfer),
                });
                if self.llama_cpp.is_some() {
                    result["llama_cpp"] = json!(engine(&row.llama_cpp));
                    result["ratio"] = json!(ratio(values(&row.rinfer), values(&row.llama_cpp)));
                    result["peak_rss_ratio"] = json!(ratio(rss(&row.rinfer), rss(&row.llama_cpp)));
                }
                result
            })
            .collect();
        json!({
            "model": self.model.display().to_string(),
            "machine": {
                "cpu": cpu,
                "kind": super::history::machine_kind(&cpu),
                "cores": cores,
                "busy_elsewhere": self.busy_elsewhere().map(Summary::to_json),
            },
            "reps": self.reps,
            "ceilings": self.ceilings.iter().map(|c| json!({
                "threads": c.threads,
                "read_gb_per_s": c.bandwidth / 1e9,
                "bytes_per_token": c.bytes_per_token,
                "ceiling_tok_per_s": c.tokens_per_second(),
            })).collect::<Vec<_>>(),
            "llama_cpp": self.llama_cpp,
            "results": results,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(compared: bool) -> Report {
        let sample = |value, peak_rss_mib| Sample {
            value,
            peak_rss_mib,
            busy_elsewhere: 0.25,
        };
        let llama = |v| {
            if compared {
                vec![sample(v, 200.0)]
            } else {
                vec![]
            }
        };
        Report {
            model: "m.gguf".into(),
            reps: 2,
            llama_cpp: compared.then(|| "llama.cpp 1".to_string()),
            rows: vec![
                Row {
                    test: Test::Prompt(128),
                    threads: 2,
                    rinfer: vec![sample(90.0, 100.0), sample(110.0, 120.0)],
                    llama_cpp: llama(200.0),
                },
                Row {
                    test: Test::FirstToken,
                    threads: 1,
                    rinfer: vec![sample(0.5, 100.0)],
                    llama_cpp: llama(0.25),
                },
                Row {
                    test: Test::Generate(128),
                    threads: 2,
                    rinfer: vec![sample(50.0, 100.0)],
                    llama_cpp: llama(25.0),
                },
            ],
            ceilings: vec![Ceiling {
                threads: 2,
                bandwidth: 20e9,
                bytes_per_token: 200_000_000,
            }],
        }
    }

    #[test]
    fn markdown_rows_show_median_range_and_ratio() {
        let text = report(true).to_markdown();
        assert!(
            text.contains(
                "| pp128 (tok/s) | 2 | 100.0 (90.0–110.0) | 200.0 (200.0–200.0) | 0.50 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| first_token (s) | 1 | 0.500 (0.500–0.500) |"),
            "{text}"
        );
        assert!(
            text.contains("| pp128 | 2 | 110 (100–120) | 200 (200–200) | 0.55 |"),
            "{text}"
        );
        assert!(text.contains("other processes during the measurements: 25% (25–25%)"));
        assert!(
            text.contains("| tg128 | 2 | 20.0 | 100.0 | 50 | 25 |"),
            "decode against the ceiling: {text}"
        );
        assert!(!report(false).to_markdown().contains("llama.cpp |"));
    }

    #[test]
    fn json_has_summaries_and_ratios() {
        let json = report(true).to_json();
        let first = &json["results"][0];
        assert_eq!(first["test"], "pp128");
        assert_eq!(first["rinfer"]["median"], 100.0);
        assert_eq!(first["rinfer"]["peak_rss_mib"]["max"], 120.0);
        assert_eq!(first["ratio"], 0.5);
        assert_eq!(json["results"][1]["ratio"], 2.0);
        assert_eq!(json["ceilings"][0]["ceiling_tok_per_s"], 100.0);
        assert!(report(false).to_json()["results"][0].get("ratio").is_none());
    }

    #[test]
    fn a_record_keeps_each_tests_medians() {
        let record = report(true).record("cpu", "2026-11-27", "abc1234");
        assert_eq!(record["results"][0]["rinfer"], 100.0);
        assert_eq!(record["results"][0]["llama_cpp"], 200.0);
        assert_eq!(record["results"][1]["unit"], "s");
        assert_eq!(
            report(false).record("cpu", "d", "c")["results"][0]["llama_cpp"],
            Value::Null
        );
    }
}
