//! A chat template is code from the model's author: each way a hostile template could exhaust
//! the process (unbounded output, endless loops, data that doubles, deep recursion, a render
//! that never returns) ends in a clear error. Limits are set low so each test is fast.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rinfer_formats::gguf::GgufFile;
use rinfer_text::chat_template::{ChatMessage, ChatTemplate, ChatTemplateError, RenderLimits};
use rinfer_text::tokenizer::Tokenizer;

fn template(source: &str, limits: RenderLimits) -> ChatTemplate {
    ChatTemplate::new(source, "<s>", "</s>")
        .unwrap()
        .with_limits(limits)
}

fn hi() -> Vec<ChatMessage> {
    vec![ChatMessage::user("hi")]
}

/// Plenty of everything but the limit under test.
fn generous() -> RenderLimits {
    RenderLimits {
        fuel: 1 << 40,
        max_output_bytes: 1 << 30,
        max_range: 1 << 20,
        recursion: 100,
        deadline: Duration::from_secs(60),
    }
}

/// The error rendering `source` under `limits` ends in.
fn render_error(source: &str, limits: RenderLimits) -> ChatTemplateError {
    template(source, limits).render(&hi(), true).unwrap_err()
}

/// `source`, whose data doubles without bound, runs out of a million steps of fuel.
fn assert_runs_out_of_fuel(source: &str) {
    let limits = RenderLimits {
        fuel: 1_000_000,
        ..generous()
    };
    let err = render_error(source, limits);
    assert!(matches!(err, ChatTemplateError::OutOfFuel { .. }), "{err}");
}

/// Would write 10 GB; stops at the output cap.
#[test]
fn ten_gigabytes_of_output_stop_at_the_cap() {
    let err = render_error(
        "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
        RenderLimits {
            max_output_bytes: 1 << 20,
            ..generous()
        },
    );
    assert!(
        matches!(err, ChatTemplateError::OutputTooLarge { limit } if limit == 1 << 20),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the chat template wrote more than 1048576 bytes"
    );
}

/// Two nested `range(100000)` loops would run 10^10 steps; fuel ends them.
#[test]
fn nested_loops_run_out_of_fuel() {
    let start = Instant::now();
    let err = render_error(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        RenderLimits {
            fuel: 200_000,
            ..generous()
        },
    );
    assert!(
        matches!(err, ChatTemplateError::OutOfFuel { fuel: 200_000 }),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
}

/// A list that doubles 40 times would need terabytes; fuel charges every slot first.
#[test]
fn a_list_doubling_forty_times_runs_out_of_fuel() {
    assert_runs_out_of_fuel(
        "{% set ns = namespace(items=[1]) %}{% for i in range(40) %}\
         {% set ns.items = (ns.items + ns.items) | list %}{% endfor %}{{ ns.items | length }}",
    );
}

/// Doubled lazily (`+` alone keeps the halves), the list costs nothing until it is used; then
/// every item is charged.
#[test]
fn a_lazily_doubled_list_runs_out_of_fuel_when_used() {
    assert_runs_out_of_fuel(
        "{% set ns = namespace(items=[1]) %}{% for i in range(30) %}\
         {% set ns.items = ns.items + ns.items %}{% endfor %}\
         {% for x in ns.items %}{% endfor %}",
    );
}

/// The same doubling with strings.
#[test]
fn a_string_doubling_forty_times_runs_out_of_fuel() {
    assert_runs_out_of_fuel(
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}\
         {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    );
}

/// `range` refuses more items than the limit, whatever the step.
#[test]
fn range_is_bounded() {
    let limits = RenderLimits {
        max_range: 1000,
        ..generous()
    };
    for call in [
        "range(1001)",
        "range(-5000, 5000, 7)",
        "range(5000, -5000, -3)",
    ] {
        let err = render_error(&format!("{{% for i in {call} %}}{{% endfor %}}"), limits);
        assert!(matches!(err, ChatTemplateError::Render(_)), "{call}: {err}");
        assert!(
            err.to_string().contains("over the limit of 1000"),
            "{call}: {err}"
        );
    }
    // Within the limit, `range` behaves as Jinja's.
    let t = template(
        "{{ range(3) | list }}{{ range(10, 0, -4) | list }}{{ range(2, 8, 3) | list }}",
        limits,
    );
    assert_eq!(t.render(&hi(), true).unwrap(), "[0, 1, 2][10, 6, 2][2, 5]");
}

/// A macro that calls itself forever stops at the recursion limit.
#[test]
fn endless_recursion_stops_at_the_limit() {
    let err = render_error(
        "{% macro down(n) %}{{ down(n + 1) }}{% endmacro %}{{ down(0) }}",
        RenderLimits {
            recursion: 50,
            ..generous()
        },
    );
    assert!(matches!(err, ChatTemplateError::Render(_)), "{err}");
    assert!(err.to_string().contains("recursion"), "{err}");
}

fn small_tokenizer() -> Tokenizer {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf");
    Tokenizer::from_gguf(GgufFile::open(path).unwrap().metadata()).unwrap()
}

/// A render slower than the deadline gives `TimedOut` at the deadline; the worker, left
/// behind, ends on its own fuel.
#[test]
fn a_slow_template_times_out() {
    let t = Arc::new(template(
        "{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
        RenderLimits {
            fuel: 20_000_000,
            deadline: Duration::from_millis(20),
            ..generous()
        },
    ));
    let start = Instant::now();
    let err = t
        .render_tokens(&hi(), true, &small_tokenizer())
        .unwrap_err();
    assert!(
        matches!(err, ChatTemplateError::TimedOut { after } if after == Duration::from_millis(20)),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// The default limits leave a real conversation all the room it needs, message text of a
/// couple of megabytes included.
#[test]
fn default_limits_fit_a_large_conversation() {
    let t = Arc::new(
        ChatTemplate::new(
            "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}",
            "",
            "",
        )
        .unwrap(),
    );
    let mut messages = Vec::new();
    for i in 0..200 {
        messages.push(ChatMessage::user(format!("question {i}")));
        messages.push(ChatMessage::assistant(format!("answer {i}")));
    }
    messages.push(ChatMessage::user("word ".repeat(400_000)));
    let text = t.render(&messages, true).unwrap();
    assert!(text.len() > 2_000_000);
    assert!(t.render_tokens(&messages, true, &small_tokenizer()).is_ok());
}
