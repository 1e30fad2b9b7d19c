//! A ranker's input: a query and a document in one sequence, as llama-server's
//! `format_prompt_rerank` lays them out.
//!
//! With a rerank prompt (`tokenizer.chat_template.rerank`, which llama.cpp's converter writes
//! for Qwen3-Reranker), `{query}` and then `{document}` are replaced in it (a query that
//! itself holds `{document}` gets the document there too, as in llama.cpp) and the text is
//! tokenized without added special tokens, its control tokens parsed. Without one, the query
//! and the document are each tokenized without special tokens, control tokens as plain text,
//! and joined as `BOS query EOS SEP document EOS`, each special token present only where the
//! vocabulary's flags ask for it: BOS with `add_bos`, the EOS (or SEP where the vocabulary has
//! no EOS) with `add_eos`, SEP with `add_sep`. A BERT cross-encoder converted by llama.cpp asks
//! for BOS and EOS (`[CLS] query [SEP] document [SEP]`).
//!
//! These are llama.cpp's own flags and ids, which for WordPiece differ from what single-text
//! encoding uses ([`Vocab`] stands `[CLS]`/`[SEP]` in for BOS/EOS there): WordPiece defaults to
//! no BOS, no EOS, SEP = 102 and `add_sep`, each overridden by the file.

use std::sync::atomic::AtomicBool;

use rinfer_formats::gguf::Metadata;

use super::special::ControlTokens;
use super::vocab::{Vocab, VocabKind, flag, int, string};
use super::{Tokenizer, TokenizerError};

/// The metadata key of the rerank prompt.
const TEMPLATE_KEY: &str = "tokenizer.chat_template.rerank";

/// How a query and a document become one sequence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RerankFormat {
    /// The rerank prompt, with `{query}` and `{document}` in it.
    template: Option<String>,
    /// Before the query.
    first: Option<u32>,
    /// Between the query and the document.
    middle: Vec<u32>,
    /// After the document.
    last: Option<u32>,
}

impl RerankFormat {
    /// The format llama.cpp reads from a GGUF file's metadata.
    pub(crate) fn from_gguf(meta: &Metadata, vocab: &Vocab) -> Result<Self, TokenizerError> {
        let n_tokens = vocab.tokens.len();
        let id = |key: &str| -> Result<Option<u32>, TokenizerError> {
            Ok(int(meta, key)?
                .filter(|&id| id >= 0 && (id as u128) < n_tokens as u128)
                .map(|id| id as u32))
        };
        let wpm = vocab.kind == VocabKind::Wpm;
        let default_id = |id: u32| (wpm && (id as usize) < n_tokens).then_some(id);
        let (bos, eos, add_bos, add_eos) = if wpm {
            (
                id("tokenizer.ggml.bos_token_id")?.or(default_id(101)),
                id("tokenizer.ggml.eos_token_id")?,
                flag(meta, "tokenizer.ggml.add_bos_token")?.unwrap_or(false),
                flag(meta, "tokenizer.ggml.add_eos_token")?.unwrap_or(false),
            )
        } else {
            (vocab.bos, vocab.eos, vocab.add_bos, vocab.add_eos)
        };
        let sep = id("tokenizer.ggml.seperator_token_id")?.or(default_id(102));
        let add_sep = flag(meta, "tokenizer.ggml.add_sep_token")?.unwrap_or(wpm);
        let template = string(meta, TEMPLATE_KEY)?.map(str::to_owned);
        Ok(Self::joined(
            (bos, eos.or(sep), sep),
            (add_bos, add_eos, add_sep),
            template,
        ))
    }

    /// The format of a vocabulary without llama.cpp's metadata (a `tokenizer.json`): its own
    /// BOS and EOS flags, no SEP, no prompt.
    pub(crate) fn from_vocab(vocab: &Vocab) -> Self {
        Self::joined(
            (vocab.bos, vocab.eos, None),
            (vocab.add_bos, vocab.add_eos, false),
            None,
        )
    }

    fn joined(
        (bos, end, sep): (Option<u32>, Option<u32>, Option<u32>),
        (add_bos, add_eos, add_sep): (bool, bool, bool),
        template: Option<String>,
    ) -> Self {
        let end = end.filter(|_| add_eos);
        Self {
            template,
            first: bos.filter(|_| add_bos),
            middle: end.into_iter().chain(sep.filter(|_| add_sep)).collect(),
            last: end,
        }
    }
}

impl Tokenizer {
    /// The tokens a ranker scores for `query` and `document` (see the module's docs); gives
    /// up as [`Tokenizer::encode_with_cancel`] does once `cancel` is raised.
    pub fn encode_rerank(
        &self,
        query: &str,
        document: &str,
        cancel: &AtomicBool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let format = &self.rerank;
        if let Some(template) = &format.template {
            let prompt = template
                .replace("{query}", query)
                .replace("{document}", document);
            return self.encode_with(&prompt, false, ControlTokens::Parsed, Some(cancel));
        }
        let literal = |text| self.encode_with(text, false, ControlTokens::Literal, Some(cancel));
        let mut out = Vec::new();
        out.extend(format.first);
        out.extend(literal(query)?);
        out.extend(&format.middle);
        out.extend(literal(document)?);
        out.extend(format.last);
        Ok(out)
    }

    /// Whether the model has its own rerank prompt (a decoder reranker).
    pub fn has_rerank_prompt(&self) -> bool {
        self.rerank.template.is_some()
    }
}
