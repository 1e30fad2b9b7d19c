//! Tokenizer encode of a paragraph of mixed text: with the default model's vocabulary (Gemma 3)
//! when `RINFER_TEST_MODEL` names it, and always with the Llama 3 BPE vocabulary of the
//! repository's test fixtures.

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rinfer_benches::default_model;
use rinfer_formats::gguf::GgufFile;
use rinfer_model::Tokenizer;

/// About 1 KiB of prose, code, numbers and non-Latin text, repeated to 16 KiB.
fn text() -> String {
    let paragraph = "The quick brown fox jumps over the lazy dog, 1234567 times (or 3.14 \
        per second). fn main() { println!(\"héllo, wörld\"); } — naïve café résumé; \
        日本語のテキスト、中文文本, 한국어 텍스트. Emoji: 🦀🚀. Whitespace:\t\ttabs and    \
        spaces\n\nnew paragraphs. URLs like https://example.com/path?query=1&b=2 and \
        e-mail addresses; CamelCaseIdentifiers and snake_case_ones; 'quotes' and \"more\". ";
    paragraph.repeat(16 * 1024 / paragraph.len() + 1)
}

fn load(path: &Path) -> Tokenizer {
    let file = GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tokenizer::from_gguf(file.metadata()).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn encode(c: &mut Criterion) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf");
    let mut vocabularies = vec![("llama-bpe", load(&fixture))];
    if let Some(model) = default_model() {
        vocabularies.push(("default-model", load(&model)));
    }
    let text = text();
    let mut group = c.benchmark_group("tokenizer_encode");
    group.throughput(Throughput::Bytes(text.len() as u64));
    for (name, tokenizer) in &vocabularies {
        group.bench_function(*name, |b| {
            b.iter(|| {
                tokenizer
                    .encode(&text, true, false)
                    .expect("GGUF vocabularies encode any text")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
