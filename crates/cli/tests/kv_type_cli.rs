//! `--kv-type` as users give it: every computing command takes it, an unknown type is refused
//! naming the choices, and the memory plan of `-v` shows the KV cache shrink.

mod cli_support;
mod serve_support;

use cli_support::{fixture, rinfer};
use serve_support::Server;

fn model() -> String {
    fixture("models/gemma3-tiny-q4_k_m.gguf")
}

/// The MiB of the KV cache line of `-v`'s memory plan, and its type.
fn kv_line(stderr: &str) -> (String, f64) {
    let line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("KV cache ("))
        .unwrap_or_else(|| panic!("no KV cache line in: {stderr}"));
    let kv_type = line.split(['(', ',']).nth(1).unwrap().trim().to_string();
    let mib = line.rsplit(": ").next().unwrap().trim_end_matches(" MiB");
    (kv_type, mib.parse().unwrap())
}

#[test]
fn an_unknown_kv_type_is_refused_naming_the_choices_by_every_command() {
    let model = model();
    let cases: &[&[&str]] = &[
        &["run", "-m", &model, "--kv-type", "q2_k", "hi"],
        &["chat", "-m", &model, "--kv-type", "bf16"],
        &[
            "logits",
            "-m",
            &model,
            "--kv-type",
            "f64",
            "--tokens",
            "1,2",
        ],
        &["serve", "-m", &model, "--kv-type", "q2_k"],
    ];
    for args in cases {
        let out = rinfer(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("expected f32, f16, q8_0"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn the_memory_plan_shows_the_kv_cache_of_the_chosen_type() {
    let model = model();
    let plan = |kv_type: Option<&str>| {
        let mut args = vec!["run", "-m", &model, "-v", "--ctx", "512", "-n", "2"];
        if let Some(t) = kv_type {
            args.extend(["--kv-type", t]);
        }
        args.push("hi");
        let out = rinfer(&args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        kv_line(&stderr)
    };
    let (default_type, default_mib) = plan(None);
    let (f32_type, f32_mib) = plan(Some("f32"));
    let (f16_type, f16_mib) = plan(Some("f16"));
    let (q8_type, q8_mib) = plan(Some("q8_0"));
    assert_eq!(
        (
            default_type.as_str(),
            f32_type.as_str(),
            f16_type.as_str(),
            q8_type.as_str()
        ),
        ("f16", "f32", "f16", "q8_0")
    );
    assert_eq!(default_mib, f16_mib);
    assert!((f16_mib * 2.0 - f32_mib).abs() < 0.2, "{f16_mib} {f32_mib}");
    assert!(q8_mib < f16_mib && q8_mib > f32_mib / 4.0, "{q8_mib}");
}

#[test]
fn logits_are_computed_with_the_kv_type_given() {
    let model = model();
    let logits = |kv_type: &str| {
        let out = rinfer(&[
            "logits",
            "-m",
            &model,
            "--kv-type",
            kv_type,
            "--tokens",
            "1,15,27",
        ]);
        assert!(
            out.status.success(),
            "{kv_type}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let exact = logits("f32");
    // Rounded keys and values move the later positions' logits a little.
    assert_ne!(exact, logits("q8_0"));
    assert_eq!(logits("f16"), logits("f16"));
}

/// The `engine ready` line's `kv_type` and `kv_cache_mib` of a server started with `args`.
fn served_kv(args: &[&str]) -> (String, usize) {
    let server = Server::start(args);
    let log = server.wait_for_log("engine ready");
    let line = log
        .iter()
        .find(|l| l.contains("engine ready"))
        .unwrap_or_else(|| panic!("no engine ready line in {log:?}"));
    let field = |name: &str| {
        let rest = line.split(&format!("{name}=")).nth(1).unwrap();
        rest.split_whitespace().next().unwrap().to_string()
    };
    (field("kv_type"), field("kv_cache_mib").parse().unwrap())
}

#[test]
fn serve_takes_the_kv_type_and_its_caches_shrink_with_it() {
    let model = model();
    let args = |kv_type: &'static str| {
        let mut args = vec!["-m", &model, "--ctx", "4096", "--parallel", "8"];
        if !kv_type.is_empty() {
            args.extend(["--kv-type", kv_type]);
        }
        args
    };
    let (default_type, default_mib) = served_kv(&args(""));
    let (f32_type, f32_mib) = served_kv(&args("f32"));
    let (f16_type, f16_mib) = served_kv(&args("f16"));
    assert_eq!(
        (default_type.as_str(), f32_type.as_str(), f16_type.as_str()),
        ("f16", "f32", "f16")
    );
    assert_eq!(default_mib, f16_mib);
    assert!(
        f16_mib * 2 <= f32_mib + 1 && f16_mib > 0,
        "{f16_mib} {f32_mib}"
    );
}
