//! `cargo xtask bench [model]`: prompt processing (pp128, pp512, pp2048), generation (tg128) and
//! load-to-first-token time with peak memory, of the release `rinfer` binary on one model at
//! several thread counts, each measurement in a fresh process and repeated. With
//! `--vs-llama-cpp`, llama.cpp runs the same tests on the same model in the same run,
//! alternating with rinfer measurement by measurement, so that both see the same machine state.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{Value, json};

use super::cache;
use super::ceiling::{self, Ceiling};
use super::history::{self, History};
use super::llama_cpp::{self, LlamaCpp};
use super::measure::{Sample, TESTS};
use super::options::{BenchOptions, USAGE};
use super::report::{self, Report, Row};
use super::rinfer::{Prompts, Rinfer};

/// Runs the model bench with `args` (the arguments after `bench [model]`).
pub fn run(args: &[String]) -> Result<()> {
    let Some(options) = BenchOptions::parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    let rinfer = Rinfer::build()?;
    let model = options.model.file(|| rinfer.default_model())?;
    let llama_cpp = match options.vs_llama_cpp {
        true => Some(LlamaCpp::obtain(&cache::root()?)?),
        false => None,
    };
    let prompts = rinfer.prepare_prompts(&model, &TESTS)?;
    let engines = Engines {
        rinfer,
        llama_cpp,
        prompts,
        model,
    };
    let mut rows: Vec<Row> = TESTS
        .iter()
        .flat_map(|&test| {
            options.threads.iter().map(move |&threads| Row {
                test,
                threads,
                rinfer: Vec::new(),
                llama_cpp: Vec::new(),
            })
        })
        .collect();
    // The read bandwidth is measured once per repetition, between the engines' runs, so that it
    // sees the same machine state they do; its median is the ceiling. It runs in a child process
    // of its own, so its buffer never counts in the engines' peak memory.
    let mut bandwidths: Vec<Vec<f64>> = vec![Vec::new(); options.threads.len()];
    for rep in 1..=options.reps {
        for row in &mut rows {
            // Alternate which engine goes first, so that neither always runs on a machine the
            // other has just warmed up or heated.
            engines.measure(row, rep % 2 == 1)?;
            eprintln!("[{rep}/{}] {}", options.reps, progress(row));
        }
        for (samples, &threads) in bandwidths.iter_mut().zip(&options.threads) {
            samples.push(ceiling::read_bandwidth_in_child(threads)?);
        }
    }
    let bytes_per_token = ceiling::bytes_per_token(&engines.model)?;
    let ceilings = options
        .threads
        .iter()
        .zip(bandwidths)
        .map(|(&threads, mut samples)| {
            samples.sort_by(f64::total_cmp);
            Ceiling {
                threads,
                bandwidth: samples[samples.len() / 2],
                bytes_per_token,
            }
        })
        .collect();
    let report = Report {
        llama_cpp: engines.llama_cpp.map(|_| {
            format!(
                "vendored in the llama-cpp-python {} source distribution",
                llama_cpp::VERSION
            )
        }),
        model: engines.model,
        reps: options.reps,
        rows,
        ceilings,
    };
    let (cpu, _) = report::machine();
    let kind = history::machine_kind(&cpu);
    let history = History::new(crate::workspace_root().join(history::DIR));
    let key = history::model_key(&report.model);
    let last = history.last(&key, kind)?;
    if options.json {
        let mut json = report.to_json();
        let last = last
            .iter()
            .map(|(kind, record)| (kind.clone(), json!(record)));
        json["last_recorded"] = Value::Object(last.collect());
        println!("{json}");
    } else {
        print!("{}", report.to_markdown());
        print!("{}", history::show_last(&last, kind));
    }
    let record = report.record(&cpu, &history::today(), &history::commit());
    let path = history.save(kind, &key, record)?;
    eprintln!(
        "kept as the last run of {key} on the {kind} kind in {}",
        path.display()
    );
    Ok(())
}

/// The engines measured on one model.
struct Engines {
    rinfer: Rinfer,
    llama_cpp: Option<LlamaCpp>,
    prompts: Prompts,
    model: PathBuf,
}

impl Engines {
    /// Adds one sample of each engine to `row`.
    fn measure(&self, row: &mut Row, rinfer_first: bool) -> Result<()> {
        let model: &Path = &self.model;
        if rinfer_first {
            let sample = self
                .rinfer
                .measure(model, &self.prompts, row.test, row.threads)?;
            row.rinfer.push(sample);
        }
        if let Some(llama_cpp) = &self.llama_cpp {
            row.llama_cpp
                .push(llama_cpp.measure(model, row.test, row.threads)?);
        }
        if !rinfer_first {
            let sample = self
                .rinfer
                .measure(model, &self.prompts, row.test, row.threads)?;
            row.rinfer.push(sample);
        }
        Ok(())
    }
}

/// `pp128 t=2: rinfer 80.100 tok/s (others 1%) llama.cpp 300.200 tok/s (others 0%)`: the
/// latest samples of `row`, each with the CPU share other processes took meanwhile.
fn progress(row: &Row) -> String {
    let unit = row.test.unit();
    let mut line = format!("{} t={}:", row.test.name(), row.threads);
    for (engine, samples) in [("rinfer", &row.rinfer), ("llama.cpp", &row.llama_cpp)] {
        if let Some(Sample {
            value,
            busy_elsewhere,
            ..
        }) = samples.last()
        {
            let others = busy_elsewhere * 100.0;
            line += &format!(" {engine} {value:.3} {unit} (others {others:.0}%)");
        }
    }
    line
}
