//! llama.cpp, the peer the model bench compares against (measured, never part of rinfer).
//!
//! On first use its source is fetched with pip as the `llama-cpp-python` source distribution
//! (which vendors llama.cpp) at a pinned version, and `llama-bench`, `llama-completion` and
//! `llama-server` (for the multi-turn serve benchmark) are built for this CPU with cmake and ninja, which pip installs into a venv beside them, all under
//! `<cache>/llama.cpp/`; later runs reuse the binaries.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use super::child;
use super::measure::{FIRST_TOKEN_CONTEXT, FIRST_TOKEN_PROMPT, Sample, Test};

/// The `llama-cpp-python` release whose vendored llama.cpp is measured.
pub const VERSION: &str = "0.3.36";

/// How llama.cpp is built: CPU only, optimised for this machine's instruction set, static.
const CMAKE_OPTIONS: &[&str] = &[
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
];

/// On x86-64, AMX is left out: ggml's AMX matmul dies with SIGSEGV on `ldtilecfg` on virtual
/// machines that list AMX in cpuid without enabling it (as on the machine in
/// docs/BENCHMARKS.md). rinfer uses its AMX kernels only where Linux grants the process the
/// tile state, which such machines do not, so there both engines run AVX-512/AVX2 code.
/// (`-mno-amx-*` wins over `-march=native` whatever their order.)
const X86_64_OPTIONS: &[&str] = &[
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
];

/// The cmake options for this machine.
fn cmake_options() -> Vec<&'static str> {
    let mut options = CMAKE_OPTIONS.to_vec();
    if cfg!(target_arch = "x86_64") {
        options.extend(X86_64_OPTIONS);
    }
    options
}

/// The built llama.cpp tools.
pub struct LlamaCpp {
    bench: PathBuf,
    completion: PathBuf,
    server: PathBuf,
}

impl LlamaCpp {
    /// The tools under `cache/llama.cpp/<VERSION>`, fetched and built first if missing or
    /// built with other settings than [`cmake_options`].
    pub fn obtain(cache: &Path) -> Result<Self> {
        let root = cache.join("llama.cpp");
        let dir = root.join(VERSION);
        let build = dir.join("build");
        let bin = build.join("bin");
        let tools = Self {
            bench: bin.join("llama-bench"),
            completion: bin.join("llama-completion"),
            server: bin.join("llama-server"),
        };
        let built = |t: &Self| t.bench.is_file() && t.completion.is_file() && t.server.is_file();
        let stamp = build.join("rinfer-cmake-options.txt");
        let options = cmake_options();
        let options_text = options.join(" ");
        let built_with = std::fs::read_to_string(&stamp).unwrap_or_default();
        if built(&tools) && built_with == options_text {
            return Ok(tools);
        }
        let source = source(cache)?;
        let venv = root.join("venv");
        let cmake = tool_in_venv(&venv, "cmake")?;
        let ninja = tool_in_venv(&venv, "ninja")?;
        let mut configure = Command::new(&cmake);
        configure.arg("-S").arg(&source).arg("-B").arg(&build);
        configure
            .args(["-G", "Ninja"])
            .arg(format!("-DCMAKE_MAKE_PROGRAM={}", ninja.display()));
        run_shown(configure.args(&options))?;
        let mut compile = Command::new(&cmake);
        compile
            .arg("--build")
            .arg(&build)
            .args(["--parallel", "--target"]);
        run_shown(compile.args(["llama-bench", "llama-completion", "llama-server"]))?;
        ensure!(
            built(&tools),
            "the llama.cpp build left no {}, {} or {}",
            tools.bench.display(),
            tools.completion.display(),
            tools.server.display()
        );
        std::fs::write(&stamp, options_text)
            .with_context(|| format!("cannot write {}", stamp.display()))?;
        Ok(tools)
    }

    /// The `llama-server` binary.
    pub fn server(&self) -> &Path {
        &self.server
    }

    /// Runs `test` once on `threads` threads in a fresh process, with llama.cpp's defaults
    /// otherwise (llama-bench warms up before it measures, as `rinfer run --warmup` does).
    pub fn measure(&self, model: &Path, test: Test, threads: usize) -> Result<Sample> {
        let threads = threads.to_string();
        let (mut command, prompt, generate) = match test {
            Test::Prompt(n) => (Command::new(&self.bench), n, 0),
            Test::Generate(n) => (Command::new(&self.bench), 0, n),
            Test::FirstToken => {
                let mut command = Command::new(&self.completion);
                command
                    .arg("-m")
                    .arg(model)
                    .args(["-p", FIRST_TOKEN_PROMPT]);
                command.args(["-n", "1", "-t", &threads, "--temp", "0", "-no-cnv"]);
                command.args(["--no-warmup", "-c", &FIRST_TOKEN_CONTEXT.to_string()]);
                let done = child::run(&mut command)?;
                return Ok(Sample::of(done.wall_s, &done));
            }
        };
        command
            .arg("-m")
            .arg(model)
            .args(["-r", "1", "-o", "json", "-t", &threads]);
        command.args(["-p", &prompt.to_string(), "-n", &generate.to_string()]);
        let done = child::run(&mut command)?;
        let value = tokens_per_second(&done.stdout, prompt, generate)?;
        Ok(Sample::of(value, &done))
    }
}

/// The tok/s of the test with `n_prompt` and `n_gen` in llama-bench's JSON output.
fn tokens_per_second(json: &str, n_prompt: usize, n_gen: usize) -> Result<f64> {
    let results: Value =
        serde_json::from_str(json).with_context(|| format!("llama-bench printed {json:?}"))?;
    let is_test = |r: &&Value| {
        r.get("n_prompt").and_then(Value::as_u64) == Some(n_prompt as u64)
            && r.get("n_gen").and_then(Value::as_u64) == Some(n_gen as u64)
    };
    results
        .as_array()
        .and_then(|rs| rs.iter().find(is_test))
        .and_then(|r| r.get("avg_ts"))
        .and_then(Value::as_f64)
        .with_context(|| {
            format!("llama-bench printed no avg_ts for pp{n_prompt} tg{n_gen}: {json}")
        })
}

/// Downloads the source distribution into `dir` and unpacks its vendored llama.cpp as `source`.
/// llama.cpp's source tree, `cache/llama.cpp/<VERSION>/src`, fetched first if missing.
pub fn source(cache: &Path) -> Result<PathBuf> {
    let dir = cache.join("llama.cpp").join(VERSION);
    let source = dir.join("src");
    if !source.join("CMakeLists.txt").is_file() {
        fetch_source(&dir, &source)?;
    }
    Ok(source)
}

fn fetch_source(dir: &Path, source: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let package = format!("llama-cpp-python=={VERSION}");
    let mut download = Command::new("python3");
    download.args([
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-binary",
        "llama-cpp-python",
    ]);
    run_shown(download.arg("-d").arg(dir).arg(&package))?;
    let archive = dir.join(format!("llama_cpp_python-{VERSION}.tar.gz"));
    ensure!(archive.is_file(), "pip left no {}", archive.display());
    std::fs::create_dir_all(source)
        .with_context(|| format!("cannot create {}", source.display()))?;
    let mut unpack = Command::new("tar");
    unpack.arg("-xzf").arg(&archive).arg("-C").arg(source);
    unpack.args([
        "--strip-components=3",
        &format!("llama_cpp_python-{VERSION}/vendor/llama.cpp"),
    ]);
    run_shown(&mut unpack)
}

/// `name` from the tools venv at `venv` (created, with cmake and ninja, on first use).
fn tool_in_venv(venv: &Path, name: &str) -> Result<PathBuf> {
    let tool = venv.join("bin").join(name);
    if tool.is_file() {
        return Ok(tool);
    }
    if !venv.join("bin").join("pip").is_file() {
        run_shown(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    }
    run_shown(Command::new(venv.join("bin").join("pip")).args(["install", "cmake", "ninja"]))?;
    ensure!(tool.is_file(), "pip installed no {}", tool.display());
    Ok(tool)
}

/// Prints and runs `command` with its output on stderr (stdout carries the report), failing
/// unless it succeeds.
fn run_shown(command: &mut Command) -> Result<()> {
    let shown = format!("{command:?}");
    eprintln!("==> {shown}");
    let status = command
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot run {shown}"))?;
    if !status.success() {
        bail!("{shown} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tok_s_of_the_matching_llama_bench_result() {
        let json = r#"[
          {"n_prompt": 512, "n_gen": 0, "n_threads": 2, "avg_ts": 801.5, "stddev_ts": 0.0},
          {"n_prompt": 0, "n_gen": 128, "n_threads": 2, "avg_ts": 88.25, "stddev_ts": 0.0}
        ]"#;
        assert_eq!(tokens_per_second(json, 512, 0).unwrap(), 801.5);
        assert_eq!(tokens_per_second(json, 0, 128).unwrap(), 88.25);
        assert!(tokens_per_second(json, 128, 0).is_err());
        assert!(tokens_per_second("not json", 128, 0).is_err());
    }
}
