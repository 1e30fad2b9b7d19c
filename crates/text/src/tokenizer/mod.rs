//! Text ⇄ token ids, matching llama.cpp.
//!
//! A [`Tokenizer`] is built from a GGUF file's `tokenizer.ggml.*` metadata
//! ([`Tokenizer::from_gguf`]) or from a Hugging Face `tokenizer.json`
//! ([`Tokenizer::from_hf_json`]).
//!
//! For GGUF vocabularies the pipeline is llama.cpp's `llama_tokenize`: special tokens are cut out
//! of the text first (module `special`, in one pass over the text), then each remaining piece goes to the model:
//! - `llama` (SentencePiece): module `spm`, written out here because llama.cpp's score-driven
//!   merge is not what the `tokenizers` crate implements;
//! - `gpt2` (byte-level BPE): module `bpe`, a `tokenizers` BPE model rebuilt from the GGUF
//!   vocabulary and merges, with the pre-tokenizer regexes llama.cpp picks by
//!   `tokenizer.ggml.pre`;
//! - `gemma4` (BPE over SentencePiece-style pieces): module `piece_bpe`, a `tokenizers` BPE
//!   model over the GGUF pieces with byte fallback;
//! - `none` (no vocabulary, llama.cpp's no-vocab mode): token ids only; encoding text is an
//!   error that says so, and ids decode to nothing.
//!
//! A `tokenizer.json` runs entirely through the `tokenizers` crate, with Hugging Face semantics.

mod bpe;
mod hf;
mod piece_bpe;
mod pieces;
mod rerank;
mod special;
#[cfg(test)]
mod special_tests;
mod spm;
mod stream;
mod token;
mod token_index;
mod vocab;
mod wpm;

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rinfer_formats::gguf::Metadata;

pub use stream::StreamDecoder;
pub use vocab::TokenType;

use pieces::Pieces;
use rerank::RerankFormat;
use special::{ControlTokens, Fragment};
use vocab::{Vocab, VocabKind};

/// Why a tokenizer could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The caller raised its cancel flag ([`Tokenizer::encode_with_cancel`]).
    #[error("tokenization was cancelled")]
    Cancelled,
    /// The tokenizer's own pipeline rejected the text (a `tokenizer.json` whose model cannot
    /// represent some piece of it).
    #[error("the tokenizer cannot encode this text: {0}")]
    Encode(String),
    /// A metadata key the tokenizer needs is absent.
    #[error("GGUF metadata key `{key}` is missing; the file has no usable tokenizer")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key holds a value of the wrong type.
    #[error("GGUF metadata key `{key}` should hold {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// A per-token array does not have one entry per token.
    #[error("GGUF metadata key `{key}` has {len} entries but the vocabulary has {n_tokens} tokens")]
    LengthMismatch {
        /// The key.
        key: String,
        /// Its length.
        len: usize,
        /// The number of tokens in `tokenizer.ggml.tokens`.
        n_tokens: usize,
    },
    /// A special token id is not in the vocabulary.
    #[error("GGUF metadata key `{key}` = {id} is outside the vocabulary of {n_tokens} tokens")]
    IdOutOfRange {
        /// The key.
        key: String,
        /// The id it holds.
        id: i128,
        /// The vocabulary size.
        n_tokens: usize,
    },
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error(
        "unsupported tokenizer model \"{0}\" in tokenizer.ggml.model (supported: \"llama\", \"gpt2\", \"bert\", \"gemma4\", \"none\")"
    )]
    UnsupportedModel(String),
    /// The model file has no vocabulary (`tokenizer.ggml.model = "none"`), so text cannot
    /// become token ids.
    #[error(
        "this model has no vocabulary (tokenizer.ggml.model = \"none\"): give the prompt as \
         token ids, not text"
    )]
    NoVocabulary,
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement.
    #[error(
        "unsupported BPE pre-tokenizer \"{0}\" in tokenizer.ggml.pre (supported: default, gpt-2, \
         phi-2, llama-bpe/llama3, qwen2, deepseek-llm, starcoder, refact)"
    )]
    UnsupportedPreTokenizer(String),
    /// The vocabulary or a tokenizer file is inconsistent.
    #[error("invalid tokenizer: {0}")]
    Invalid(String),
    /// A tokenizer file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The `tokenizers` crate rejected a `tokenizer.json`.
    #[error("cannot load Hugging Face tokenizer {path}: {message}")]
    HfJson {
        /// The file.
        path: String,
        /// What `tokenizers` said.
        message: String,
    },
}

/// How the text of each fragment is turned into ids.
enum Backend {
    /// llama.cpp's SentencePiece merge ([`spm`]).
    Spm,
    /// A `tokenizers` byte-level BPE model rebuilt from GGUF ([`bpe`]).
    Bpe(Box<tokenizers::Tokenizer>),
    /// BPE over SentencePiece-style pieces ([`piece_bpe`]).
    PieceBpe(Box<piece_bpe::PieceBpe>),
    /// No vocabulary: text cannot be encoded.
    None,
    /// A whole `tokenizer.json` pipeline ([`hf`]).
    Hf(Box<hf::HfTokenizer>),
    /// llama.cpp's WordPiece ([`wpm`]), with the longest token's length in bytes.
    Wpm { max_token_len: usize },
}

/// A tokenizer: text to token ids and back, with llama.cpp's semantics for GGUF vocabularies.
///
/// ```no_run
/// use rinfer_formats::gguf::GgufFile;
/// use rinfer_text::tokenizer::Tokenizer;
///
/// let file = GgufFile::open("model.gguf")?;
/// let tok = Tokenizer::from_gguf(file.metadata())?;
/// // Add BOS as the model expects; keep "<start_of_turn>" in the text as plain text.
/// let ids = tok.encode("Hello world", true, false)?;
/// assert_eq!(Some(ids[0]), tok.bos());
/// let text = tok.decode(&ids);
/// assert_eq!(text, "Hello world");
///
/// // Print generated ids as they come, never half a character.
/// let mut stream = tok.stream_decoder();
/// for &id in &ids {
///     if let Some(text) = stream.push(id) {
///         print!("{text}");
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Tokenizer {
    vocab: Vocab,
    backend: Backend,
    /// Each token's bytes as `llama_token_to_piece(special = true)` gives them.
    pieces: Pieces,
    /// End-of-generation ids, ascending.
    eog: Vec<u32>,
    /// How a query and a document become a ranker's input.
    rerank: RerankFormat,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos())
            .field("eos", &self.eos())
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// Builds the tokenizer described by a GGUF file's `tokenizer.ggml.*` metadata.
    ///
    /// Supported: `tokenizer.ggml.model` = `llama` (SentencePiece) and `gpt2` (byte-level BPE,
    /// with `tokenizer.ggml.pre` one of those listed in
    /// [`TokenizerError::UnsupportedPreTokenizer`]).
    pub fn from_gguf(meta: &Metadata) -> Result<Self, TokenizerError> {
        let vocab = Vocab::from_gguf(meta)?;
        let merges = || {
            const MERGES: &str = "tokenizer.ggml.merges";
            let wrong = || TokenizerError::WrongType {
                key: MERGES.into(),
                expected: "an array of strings",
            };
            meta.get(MERGES)
                .ok_or_else(|| TokenizerError::MissingKey { key: MERGES.into() })?
                .as_array()
                .ok_or_else(wrong)?
                .iter()
                .map(|m| m.as_str().ok_or_else(wrong))
                .collect::<Result<Vec<_>, _>>()
        };
        let backend = match vocab.kind {
            VocabKind::Spm => Backend::Spm,
            VocabKind::Bpe => Backend::Bpe(Box::new(bpe::build(&vocab, &merges()?)?)),
            VocabKind::PieceBpe => {
                Backend::PieceBpe(Box::new(piece_bpe::PieceBpe::build(&vocab, &merges()?)?))
            }
            VocabKind::Wpm => Backend::Wpm {
                max_token_len: vocab.tokens.iter().map(|t| t.text.len()).max().unwrap_or(0),
            },
            VocabKind::None => Backend::None,
        };
        let pieces = gguf_pieces(&vocab);
        let rerank = RerankFormat::from_gguf(meta, &vocab)?;
        Ok(Self::assemble(vocab, backend, pieces, rerank))
    }

    /// Builds the tokenizer of a Hugging Face `tokenizer.json`.
    ///
    /// BOS/EOS and whether to add them come from the `tokenizer_config.json` beside it, when
    /// there is one. Encoding then follows Hugging Face's rules (its post-processor adds the
    /// special tokens; added tokens are matched leftmost-longest), not llama.cpp's.
    pub fn from_hf_json(path: impl AsRef<Path>) -> Result<Self, TokenizerError> {
        let path = path.as_ref();
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| TokenizerError::Io {
                path: p.display().to_string(),
                source,
            })
        };
        let json = read(path)?;
        let config_path = path.with_file_name("tokenizer_config.json");
        let config = if config_path.is_file() {
            Some(read(&config_path)?)
        } else {
            None
        };
        Self::from_hf_json_str(&json, config.as_deref()).map_err(|e| match e {
            TokenizerError::HfJson { message, .. } => TokenizerError::HfJson {
                path: path.display().to_string(),
                message,
            },
            other => other,
        })
    }

    /// [`Tokenizer::from_hf_json`] for text already read: the contents of `tokenizer.json` and,
    /// optionally, of `tokenizer_config.json`.
    pub fn from_hf_json_str(json: &str, config: Option<&str>) -> Result<Self, TokenizerError> {
        let (vocab, tk, pieces) = hf::load(json, config).map_err(|e| match e {
            TokenizerError::Invalid(message) => TokenizerError::HfJson {
                path: "tokenizer.json".into(),
                message,
            },
            other => other,
        })?;
        let rerank = RerankFormat::from_vocab(&vocab);
        Ok(Self::assemble(
            vocab,
            Backend::Hf(Box::new(tk)),
            pieces,
            rerank,
        ))
    }

    fn assemble(vocab: Vocab, backend: Backend, pieces: Pieces, rerank: RerankFormat) -> Self {
        let eog = vocab.eog.iter().copied().collect();
        Tokenizer {
            vocab,
            backend,
            pieces,
            eog,
            rerank,
        }
    }

    /// Text to token ids, as `llama_tokenize(text, add_special, parse_special)` does.
    ///
    /// `add_special` adds BOS (and EOS) where the vocabulary asks for them
    /// (`tokenizer.ggml.add_bos_token` / `add_eos_token`). `parse_special` lets control tokens
    /// written in the text (`<start_of_turn>`, `<|im_end|>`) become their ids; without it they
    /// are tokenized as plain text. User-defined tokens are always matched whole.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::Encode`] when the tokenizer pipeline itself fails (a `tokenizer.json`
    /// model that needs a token it does not define); GGUF vocabularies encode any text.
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let control = if parse_special {
            ControlTokens::Parsed
        } else {
            ControlTokens::Literal
        };
        self.encode_with(text, add_special, control, None)
    }

    /// [`Tokenizer::encode`] that gives up as soon as `cancel` is raised (checked between
    /// pieces of the work, at least every 64 KiB of text while special tokens are searched):
    /// for a server whose client has left.
    ///
    /// ```
    /// use std::sync::atomic::AtomicBool;
    /// # use rinfer_text::tokenizer::{Tokenizer, TokenizerError};
    /// # fn demo(tok: &Tokenizer) -> Result<(), TokenizerError> {
    /// let cancel = AtomicBool::new(true);
    /// let err = tok.encode_with_cancel("any text", true, true, &cancel).unwrap_err();
    /// assert!(matches!(err, TokenizerError::Cancelled));
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`TokenizerError::Cancelled`] when `cancel` was raised; otherwise as
    /// [`Tokenizer::encode`].
    pub fn encode_with_cancel(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
        cancel: &AtomicBool,
    ) -> Result<Vec<u32>, TokenizerError> {
        let control = if parse_special {
            ControlTokens::Parsed
        } else {
            ControlTokens::Literal
        };
        self.encode_with(text, add_special, control, Some(cancel))
    }

    /// Encodes `text` with control tokens parsed everywhere except in `literal` (sorted byte
    /// ranges that do not overlap): there, as in the whole text without `parse_special`, they
    /// are plain text. A rendered chat prompt keeps the template's markup as control tokens and
    /// the messages' own text as text this way.
    pub(crate) fn encode_outside(
        &self,
        text: &str,
        add_special: bool,
        literal: &[Range<usize>],
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<u32>, TokenizerError> {
        self.encode_with(text, add_special, ControlTokens::OutsideOf(literal), cancel)
    }

    fn encode_with(
        &self,
        text: &str,
        add_special: bool,
        control: ControlTokens<'_>,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<u32>, TokenizerError> {
        let check = || match cancel {
            Some(c) if c.load(Ordering::Relaxed) => Err(TokenizerError::Cancelled),
            _ => Ok(()),
        };
        check()?;
        match &self.backend {
            Backend::Hf(hf) => return self.encode_hf(hf, text, add_special, control, check),
            Backend::None => return Err(TokenizerError::NoVocabulary),
            _ => {}
        }
        let v = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && v.add_bos {
            out.extend(v.bos);
        }
        // SPM: a space goes before the text and after every special token.
        let mut prev_special = true;
        let fragments = v
            .special
            .partition(text, control, cancel)
            .map_err(|_| TokenizerError::Cancelled)?;
        for fragment in fragments {
            check()?;
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(t) => match &self.backend {
                    Backend::Spm => {
                        let mut s = String::with_capacity(t.len() + 3);
                        if v.add_space_prefix && prev_special {
                            s.push(' ');
                        }
                        s.push_str(t);
                        let escaped = s.replace(' ', "\u{2581}");
                        spm::tokenize(v, &escaped, &mut out);
                        prev_special = false;
                    }
                    Backend::Bpe(tk) => {
                        let enc = tk
                            .encode(t, false)
                            .map_err(|e| TokenizerError::Encode(e.to_string()))?;
                        out.extend_from_slice(enc.get_ids());
                    }
                    Backend::PieceBpe(model) => model.tokenize(v, t, &mut out)?,
                    Backend::Wpm { max_token_len } => wpm::tokenize(v, *max_token_len, t, &mut out),
                    Backend::Hf(_) | Backend::None => unreachable!("handled above"),
                },
            }
        }
        if add_special && v.add_eos {
            out.extend(v.eos);
        }
        Ok(out)
    }

    /// A `tokenizer.json` pipeline: the whole text in one call, or, with literal ranges, each
    /// stretch on its own (with BOS/EOS added around them as the vocabulary asks).
    fn encode_hf(
        &self,
        hf: &hf::HfTokenizer,
        text: &str,
        add_special: bool,
        control: ControlTokens<'_>,
        check: impl Fn() -> Result<(), TokenizerError>,
    ) -> Result<Vec<u32>, TokenizerError> {
        let encode = |t: &str, add: bool, parse: bool| {
            hf.encode(t, add, parse)
                .map_err(|e| TokenizerError::Encode(e.to_string()))
        };
        let literal = match control {
            ControlTokens::Parsed => return encode(text, add_special, true),
            ControlTokens::Literal => return encode(text, add_special, false),
            ControlTokens::OutsideOf(literal) => literal,
        };
        let v = &self.vocab;
        let mut out = Vec::new();
        if add_special && v.add_bos {
            out.extend(v.bos);
        }
        let mut cursor = 0;
        for range in literal {
            check()?;
            if cursor < range.start {
                out.extend(encode(&text[cursor..range.start], false, true)?);
            }
            out.extend(encode(&text[range.clone()], false, false)?);
            cursor = range.end;
        }
        if cursor < text.len() {
            out.extend(encode(&text[cursor..], false, true)?);
        }
        if add_special && v.add_eos {
            out.extend(v.eos);
        }
        Ok(out)
    }

    /// Token ids to text, as `llama_detokenize(ids, remove_special = false,
    /// unparse_special = false)` does: control tokens (and media markers such as
    /// `<start_of_image>`, which are not text either) print as nothing, the space that
    /// SentencePiece put before the first word is removed, and byte-level BPE vocabularies
    /// that ask for it get llama.cpp's space clean-up (`" ,"` → `","`). A leading BOS counts as
    /// the first token, so the space after it stays, as in llama.cpp. Ids outside the
    /// vocabulary are skipped; bytes that are not valid UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> String {
        if let Backend::Hf(hf) = &self.backend {
            let markers = &self.vocab.media_markers;
            let ids: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|id| markers.binary_search(id).is_err())
                .collect();
            return hf.decode(&ids);
        }
        let mut bytes = Vec::new();
        let mut remove_space = self.vocab.add_space_prefix;
        for &id in ids {
            let piece = self.visible_piece(id);
            let piece = if remove_space {
                piece.strip_prefix(b" ").unwrap_or(piece)
            } else {
                piece
            };
            remove_space = false;
            bytes.extend_from_slice(piece);
        }
        if self.vocab.clean_spaces {
            bytes = clean_spaces(&bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// The bytes of one token as llama.cpp prints it with `special = true` (control tokens as
    /// their text, byte tokens as the raw byte, `▁` as a space); `None` outside the vocabulary.
    pub fn token_piece(&self, id: u32) -> Option<&[u8]> {
        self.pieces.get(id as usize)
    }

    /// The text of a token as stored in the vocabulary (`▁Hello`, `ĠHello`, `<0x0A>`).
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.tokens.get(id as usize).map(|t| t.text.as_str())
    }

    /// The id of a token whose vocabulary text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.text_to_token(text)
    }

    /// The type of a token (control, user-defined, byte, ...), after llama.cpp's adjustments.
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.tokens.get(id as usize).map(|t| t.ty)
    }

    /// The piece of a token as [`Tokenizer::decode`] prints it: empty for control and unknown
    /// tokens, for media markers (`<start_of_image>`) and for ids outside the vocabulary.
    fn visible_piece(&self, id: u32) -> &[u8] {
        match self.vocab.tokens.get(id as usize) {
            Some(t) if matches!(t.ty, TokenType::Control | TokenType::Unknown) => &[],
            Some(_) if self.vocab.media_markers.binary_search(&id).is_ok() => &[],
            Some(_) => self.pieces.get(id as usize).unwrap_or_default(),
            None => &[],
        }
    }

    /// The beginning-of-sequence token, if the vocabulary has one.
    pub fn bos(&self) -> Option<u32> {
        self.vocab.bos
    }

    /// The end-of-sequence token, if the vocabulary has one.
    pub fn eos(&self) -> Option<u32> {
        self.vocab.eos
    }

    /// The end-of-turn token (`tokenizer.ggml.eot_token_id`, or found by its text as llama.cpp
    /// does: `<|eot_id|>`, `<|im_end|>`, `<end_of_turn>`, ...; the lowest id when several are).
    pub fn eot(&self) -> Option<u32> {
        self.vocab.eot
    }

    /// Whether SentencePiece text gets a space in front (`tokenizer.ggml.add_space_prefix`),
    /// which [`Tokenizer::decode`] removes again from the first token.
    pub fn add_space_prefix(&self) -> bool {
        self.vocab.add_space_prefix
    }

    /// Whether the file had a vocabulary: without one (`tokenizer.ggml.model = "none"`) only
    /// token ids can be given to the model, and generated ids decode to nothing.
    pub fn has_vocabulary(&self) -> bool {
        !matches!(self.backend, Backend::None)
    }

    /// Whether [`Tokenizer::encode`] with `add_special` adds BOS.
    pub fn add_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// Every token that ends generation, ascending: EOS, EOT, EOM and the tokens llama.cpp
    /// recognises by text (`<|eot_id|>`, `<|im_end|>`, `<|end|>`, `<end_of_turn>`,
    /// `<|endoftext|>`, `<|end_of_text|>`, ...).
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// A decoder for generated ids that only ever returns whole UTF-8 characters.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }
}

/// Every token's piece as llama.cpp's `token_to_piece(special = true)` builds its cache.
fn gguf_pieces(vocab: &Vocab) -> Pieces {
    let byte_decoder = bpe::ByteDecoder::new();
    vocab
        .tokens
        .iter()
        .map(|t| match (t.ty, vocab.kind) {
            (TokenType::Control | TokenType::Unknown | TokenType::UserDefined, _) => {
                t.text.as_bytes().to_vec()
            }
            (TokenType::Normal, VocabKind::Spm | VocabKind::PieceBpe | VocabKind::Wpm) => {
                t.text.replace('\u{2581}', " ").into_bytes()
            }
            (TokenType::Normal, VocabKind::Bpe) => byte_decoder.decode(&t.text),
            (TokenType::Byte, VocabKind::Spm | VocabKind::PieceBpe) => parse_byte_token(&t.text)
                .map(|b| vec![b])
                .unwrap_or_default(),
            _ => Vec::new(),
        })
        .collect()
}

/// The byte of a `<0xAB>` token.
fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// llama.cpp's `clean_up_tokenization_spaces`: drop the space before `? ! . ,`, around a lone
/// `'`, and before `'s`, `'m`, `'re`, `'ve`. Ported pass for pass, compacting in place as the
/// C++ does (its second pass blanks the space it skips, which later comparisons then see).
fn clean_spaces(text: &[u8]) -> Vec<u8> {
    let mut t = text.to_vec();
    // First pass: " ?", " !", " .", " ,".
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        t[total] = x;
        total += 1;
    }
    // Second pass: " ' " becomes "'".
    let n = total;
    total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            total -= 1;
            i += 1;
            t[i] = 0;
        }
        t[total] = x;
        total += 1;
        i += 1;
    }
    // Third pass: " 's", " 'm", " 're", " 've" lose their space.
    let n = total;
    total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            let drop = match x1 {
                b't' | b'd' => false,
                b's' | b'm' => true,
                _ => i + 2 < n && matches!((x1, t[i + 2]), (b'r', b'e') | (b'v', b'e')),
            };
            if drop {
                total -= 1;
            }
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_spaces_matches_llama_cpp_passes() {
        assert_eq!(clean_spaces(b"a , b ."), b"a, b.");
        assert_eq!(clean_spaces(b"a ' b"), b"a'b");
        assert_eq!(clean_spaces(b"it 's we 're I 'd"), b"it's we're I 'd");
    }

    #[test]
    fn byte_tokens_parse() {
        assert_eq!(parse_byte_token("<0x0A>"), Some(0x0A));
        assert_eq!(parse_byte_token("<0xff>"), Some(0xFF));
        assert_eq!(parse_byte_token("<0x1>"), None);
    }
}
