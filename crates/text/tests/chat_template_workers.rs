//! Templates that outlive their deadline keep a worker thread busy until their fuel runs out;
//! at most `MAX_LIVE_WORKERS` such threads exist, later renders get `Busy` instead of another
//! thread, and the slots come back as the workers end. (Its own test binary: the count of live
//! workers is per process.)

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rinfer_formats::gguf::GgufFile;
use rinfer_text::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, MAX_LIVE_WORKERS, RenderLimits,
};
use rinfer_text::tokenizer::Tokenizer;

#[test]
fn runaway_workers_are_bounded() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/tokenizer/ggml-vocab-llama-spm.gguf");
    let tok = Tokenizer::from_gguf(GgufFile::open(path).unwrap().metadata()).unwrap();
    let messages = [ChatMessage::user("hi")];
    let slow = Arc::new(
        ChatTemplate::new(
            "{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
            "",
            "",
        )
        .unwrap()
        .with_limits(RenderLimits {
            // Enough to keep each worker busy for about a second or more: with less, a fast machine finished
            // the first workers before the last call, which then found a free slot.
            fuel: 10_000_000,
            deadline: Duration::ZERO,
            ..RenderLimits::default()
        }),
    );
    for _ in 0..MAX_LIVE_WORKERS {
        let err = slow.render_tokens(&messages, true, &tok).unwrap_err();
        assert!(matches!(err, ChatTemplateError::TimedOut { .. }), "{err}");
    }
    let err = slow.render_tokens(&messages, true, &tok).unwrap_err();
    assert!(matches!(err, ChatTemplateError::Busy { .. }), "{err}");

    let quick = Arc::new(ChatTemplate::new("{{ messages[0].content }}", "", "").unwrap());
    let start = Instant::now();
    loop {
        match quick.render_tokens(&messages, true, &tok) {
            Ok(ids) => {
                assert_eq!(tok.decode(&ids), "hi");
                break;
            }
            Err(ChatTemplateError::Busy { .. }) if start.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("{e}"),
        }
    }
}
