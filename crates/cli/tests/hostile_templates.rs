//! Chat templates that fuel cannot stop — walking a list nested into itself 2^60 times,
//! printing it, comparing it — are rendered in child processes that are killed at the deadline
//! or die at their memory cap; the server answers the request with an error, keeps serving, and
//! no thread or process of it keeps spinning. A template that writes more than the context can
//! hold is stopped at that size with a 400; render processes see none of the server's
//! environment; `/v1/models` names a template file without its path.

mod serve_support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_support::{Server, tiny_model};

/// A list of lists that doubles sixty times by reference: cheap to build, endless to walk.
const NESTED: &str = "{% set l = [1, 2] %}{% set m = [1, 2] %}";
fn nested() -> String {
    NESTED.to_owned() + &"{% set l = [l, l] %}{% set m = [m, m] %}".repeat(60)
}

/// Spins on `spin`, grows without bound on `grow`, renders plainly otherwise.
fn hostile_template() -> String {
    nested()
        + "{% set last = messages[-1].content %}\
           {% if last == 'spin' %}{{ l == m }}\
           {% elif last == 'grow' %}{{ l | tojson }}\
           {% else %}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n{% endif %}"
}

fn write_template(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "rinfer-hostile-{}-{name}.jinja",
        std::process::id()
    ));
    std::fs::write(&path, hostile_template()).unwrap();
    path
}

/// CPU seconds (user + system) a process has used, from `/proc/PID/stat`.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().nth(1));
        if ppid == Some(&pid.to_string()) {
            out.push(child);
        }
    }
    out
}

fn chat(server: &Server, text: &str) -> serve_support::Response {
    server.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": text}], "max_tokens": 2}),
    )
}

#[test]
fn a_runaway_template_fails_its_request_and_leaves_nothing_running() {
    let template = write_template("serve");
    let server = Server::start(&[
        "-m",
        &tiny_model(),
        "--chat-template",
        template.to_str().unwrap(),
    ]);
    assert_eq!(chat(&server, "hello").status, 200);

    let start = Instant::now();
    let spin = chat(&server, "spin");
    assert_eq!(spin.status, 500, "{}", spin.text());
    assert!(
        spin.text().contains("did not finish within"),
        "{}",
        spin.text()
    );
    assert!(start.elapsed() < Duration::from_secs(30));

    let grow = chat(&server, "grow");
    assert_eq!(grow.status, 500, "{}", grow.text());
    let grew = grow.text();
    assert!(
        grew.contains("MiB of memory") || grew.contains("did not finish within"),
        "{grew}"
    );

    // The server still chats, and after a moment of quiet neither it nor a render process
    // is busy.
    assert_eq!(chat(&server, "hello again").status, 200);
    let pids: Vec<u32> = std::iter::once(server.child.id())
        .chain(children(server.child.id()))
        .collect();
    let before: Vec<Option<u64>> = pids.iter().map(|&p| cpu_ticks(p)).collect();
    std::thread::sleep(Duration::from_secs(2));
    for (pid, before) in pids.iter().zip(before) {
        if let (Some(before), Some(after)) = (before, cpu_ticks(*pid)) {
            assert!(
                after - before < 50,
                "process {pid} used {} ticks of CPU in 2 s",
                after - before
            );
        }
    }
    let _ = std::fs::remove_file(template);
}

#[test]
fn run_with_a_runaway_template_exits_with_an_error() {
    let template = write_template("run");
    for (prompt, expected) in [("spin", "did not finish within"), ("grow", "")] {
        let start = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_rinfer"))
            .args(["run", "-m", &tiny_model(), "-n", "1", "--chat-template"])
            .arg(&template)
            .arg(prompt)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{prompt}: {stderr}");
        assert!(stderr.contains("chat template"), "{prompt}: {stderr}");
        assert!(stderr.contains(expected), "{prompt}: {stderr}");
        assert!(start.elapsed() < Duration::from_secs(30), "{prompt}");
    }
    let _ = std::fs::remove_file(template);
}

/// A template that grows without bound ends its render process at the memory cap, long before
/// the deadline; the next render starts a new process.
#[test]
fn a_template_that_grows_without_bound_dies_at_the_memory_cap() {
    use rinfer_model::chat_template::{
        ChatMessage, ChatTemplate, ChatTemplateError, RenderLimits, RenderProcess,
    };
    use std::sync::Arc;

    let process = RenderProcess {
        memory_limit_bytes: 256 << 20,
        ..RenderProcess::new(env!("CARGO_BIN_EXE_rinfer"), ["render-chat-template"])
    };
    let template = Arc::new(
        ChatTemplate::new(hostile_template(), "", "")
            .unwrap()
            .with_limits(RenderLimits {
                deadline: Duration::from_secs(120),
                ..RenderLimits::default()
            })
            .in_processes(process),
    );
    let tokenizer = rinfer_model::LoadedModel::open(tiny_model())
        .unwrap()
        .tokenizer;
    let start = Instant::now();
    let err = template
        .render_tokens(&[ChatMessage::user("grow")], true, &tokenizer)
        .unwrap_err();
    assert!(matches!(err, ChatTemplateError::Renderer(_)), "{err}");
    assert!(err.to_string().contains("256 MiB of memory"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(60));
    let ids = template
        .render_tokens(&[ChatMessage::user("hello")], true, &tokenizer)
        .unwrap();
    assert!(tokenizer.decode(&ids).contains("hello"));
}

#[test]
fn a_flooding_template_is_a_400_and_render_processes_see_no_environment() {
    let path = std::env::temp_dir().join(format!("rinfer-flood-{}.jinja", std::process::id()));
    std::fs::write(
        &path,
        "{% if messages[-1].content == 'flood' %}\
         {% for i in range(60000) %}{{ 'x' * 1000 }}{% endfor %}\
         {% else %}{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}<start_of_turn>model\n{% endif %}",
    )
    .unwrap();
    let secret = "sk-secret-in-the-environment-0042";
    let server = Server::start_with_env(
        &[("RINFER_TEST_SECRET", secret)],
        &[
            "-m",
            &tiny_model(),
            "--ctx",
            "512",
            "--chat-template",
            path.to_str().unwrap(),
        ],
    );
    assert_eq!(chat(&server, "hello").status, 200);
    let start = Instant::now();
    let flood = chat(&server, "flood");
    assert_eq!(flood.status, 400, "{}", flood.text());
    assert!(flood.text().contains("context"), "{}", flood.text());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(chat(&server, "hello again").status, 200);
    let renderers = children(server.child.id());
    assert!(!renderers.is_empty(), "no render process");
    for pid in renderers {
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&environ).contains(secret),
            "render process {pid} sees the server's environment"
        );
    }
    let models = server.get("/v1/models").json();
    let shown = models["data"][0]["chat_template"]
        .as_str()
        .unwrap()
        .to_string();
    let name = path.file_name().unwrap().to_str().unwrap();
    assert_eq!(shown, format!("file {name}"));
    let _ = std::fs::remove_file(path);
}
