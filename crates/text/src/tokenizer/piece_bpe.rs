//! BPE over SentencePiece-style pieces (`tokenizer.ggml.model = "gemma4"`), as llama.cpp's BPE
//! tokenizer runs it for Gemma 4: no byte-to-unicode map (the merges join whole UTF-8
//! characters), spaces escaped to `▁` first, the text split into runs of newlines and runs of
//! anything else (`[^\n]+|[\n]+`), a run of newlines that is a token taken whole, every other
//! run merged by rank (lowest first, leftmost on ties: the `tokenizers` BPE model's loop), and
//! a character the vocabulary lacks written as its bytes' `<0xNN>` tokens.

use tokenizers::Model;
use tokenizers::models::bpe::BPE;

use super::TokenizerError;
use super::vocab::Vocab;

/// The space marker of SentencePiece pieces.
const SPACE: char = '\u{2581}';

/// The merge model of a Gemma 4 vocabulary.
pub(crate) struct PieceBpe {
    model: BPE,
}

impl PieceBpe {
    /// The model of `vocab` and its `tokenizer.ggml.merges`.
    pub(crate) fn build(vocab: &Vocab, merges: &[&str]) -> Result<Self, TokenizerError> {
        let map: tokenizers::models::bpe::Vocab = (0u32..)
            .zip(&vocab.tokens)
            .map(|(id, t)| (t.text.clone(), id))
            .collect();
        let pairs = super::bpe::merge_pairs(merges)?;
        let model = BPE::builder()
            .vocab_and_merges(map, pairs)
            .byte_fallback(true)
            .build()
            .map_err(|e| TokenizerError::Invalid(format!("cannot build the BPE model: {e}")))?;
        Ok(Self { model })
    }

    /// Appends the ids of `text` (a fragment without special tokens) to `out`.
    pub(crate) fn tokenize(
        &self,
        vocab: &Vocab,
        text: &str,
        out: &mut Vec<u32>,
    ) -> Result<(), TokenizerError> {
        let escaped = text.replace(' ', &SPACE.to_string());
        for run in newline_runs(&escaped) {
            if run.starts_with('\n')
                && let Some(id) = vocab.text_to_token(run)
            {
                out.push(id);
                continue;
            }
            let tokens = self
                .model
                .tokenize(run)
                .map_err(|e| TokenizerError::Encode(e.to_string()))?;
            out.extend(tokens.iter().map(|t| t.id));
        }
        Ok(())
    }
}

/// `text` cut into maximal runs of newlines and of other characters, in order.
fn newline_runs(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let newline = first == '\n';
        let end = rest
            .find(|c: char| (c == '\n') != newline)
            .unwrap_or(rest.len());
        let (run, tail) = rest.split_at(end);
        rest = tail;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_splits_into_newline_and_other_runs() {
        let runs: Vec<&str> = newline_runs("ab\n\ncd\n").collect();
        assert_eq!(runs, ["ab", "\n\n", "cd", "\n"]);
        assert_eq!(newline_runs("").count(), 0);
        let runs: Vec<&str> = newline_runs("\né").collect();
        assert_eq!(runs, ["\n", "é"]);
    }
}
