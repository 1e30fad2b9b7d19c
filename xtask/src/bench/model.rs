//! `cargo xtask bench [model]`: prompt processing (pp128, pp512), generation (tg128) and
//! load-to-first-token time with peak memory, of the release `rinfer` binary on one model at
//! several thread counts, each measurement in a fresh process and repeated. With
//! `--vs-llama-cpp`, llama.cpp runs the same tests on the same model in the same run,
//! alternating with rinfer measurement by measurement, so that both see the same machine state.

use anyhow::{Result, ensure};

use super::llama_cpp::{self, LlamaCpp};
use super::measure::TESTS;
use super::options::{BenchOptions, ModelChoice, USAGE};
use super::report::{Report, Row};
use super::rinfer::Rinfer;
use super::{cache, synthetic_model};

/// Runs the model bench with `args` (the arguments after `bench [model]`).
pub fn run(args: &[String]) -> Result<()> {
    let Some(options) = BenchOptions::parse(args)? else {
        println!("{USAGE}");
        return Ok(());
    };
    let rinfer = Rinfer::build()?;
    let model = match &options.model {
        ModelChoice::Default => rinfer.default_model()?,
        ModelChoice::Llama1b => synthetic_model::cached()?,
        ModelChoice::Path(path) => path.clone(),
    };
    ensure!(model.is_file(), "no model file at {}", model.display());
    let llama_cpp = match options.vs_llama_cpp {
        true => Some(LlamaCpp::obtain(&cache::root()?)?),
        false => None,
    };
    let prompts = rinfer.prepare_prompts(&model, &TESTS)?;
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
    for rep in 1..=options.reps {
        for row in &mut rows {
            let what = format!(
                "[{rep}/{}] {} t={}",
                options.reps,
                row.test.name(),
                row.threads
            );
            // Alternate which engine goes first, so neither always runs on a machine the
            // other has just warmed or heated.
            let rinfer_first = rep % 2 == 1;
            if rinfer_first {
                row.rinfer
                    .push(rinfer.measure(&model, &prompts, row.test, row.threads)?);
            }
            if let Some(llama_cpp) = &llama_cpp {
                row.llama_cpp
                    .push(llama_cpp.measure(&model, row.test, row.threads)?);
            }
            if !rinfer_first {
                row.rinfer
                    .push(rinfer.measure(&model, &prompts, row.test, row.threads)?);
            }
            let last = |samples: &[super::measure::Sample]| {
                samples
                    .last()
                    .map_or(String::new(), |s| format!("{:.3}", s.value))
            };
            eprintln!(
                "{what}: rinfer {} {}{}",
                last(&row.rinfer),
                row.test.unit(),
                match llama_cpp {
                    Some(_) => format!(", llama.cpp {} {}", last(&row.llama_cpp), row.test.unit()),
                    None => String::new(),
                }
            );
        }
    }
    let report = Report {
        model,
        reps: options.reps,
        llama_cpp: llama_cpp.map(|_| {
            format!(
                "vendored in the llama-cpp-python {} source distribution",
                llama_cpp::VERSION
            )
        }),
        rows,
    };
    if options.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_markdown());
    }
    Ok(())
}
