//! Structured output: `response_format` (`json_object`, `json_schema`) enforced by constrained
//! decoding with `llguidance`, the constraint engine llama.cpp and mistral.rs use.
//!
//! The served tokenizer's tokens become an `llguidance` token trie on the first constrained
//! request (a server that never gets one never builds it). Each request's schema is checked
//! against size caps (`schema_limits`), then compiled once on a compile thread of its own with
//! a deadline (`compile`), and its first step is tried there too: a schema that is too large,
//! too slow or cannot be followed becomes a 400 saying why. Each sequence then gets its own
//! matcher, which masks the logits row of every step before sampling (on the engine's pool,
//! beside the other sequences' sampling). A matcher that fails later (the grammar engine's
//! limits) fails its sequence, which is answered as an error, never as a cut text.
//! Unconstrained sequences have no matcher and pay nothing.
//!
//! Whitespace between JSON tokens is not allowed (the output is compact JSON): a small model
//! would otherwise spend its tokens on blank space.

use std::sync::{Arc, Mutex, OnceLock};

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory, TokenParser};
use rinfer_model::Tokenizer;
use rinfer_model::engine::{ConstraintMatcher, TokenConstraint};
use rinfer_model::tokenizer::TokenType;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::blocking::CancelFlag;
use crate::compile::{Compiles, Stopped};
use crate::error::ApiError;
use crate::schema_limits;

/// `response_format`, as OpenAI defines it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ResponseFormat {
    /// Any text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON valid against a schema.
    JsonSchema {
        /// The schema and how to apply it.
        json_schema: JsonSchemaFormat,
    },
}

/// `response_format.json_schema`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonSchemaFormat {
    /// The schema's name (required by OpenAI; not used).
    #[allow(dead_code)]
    pub name: String,
    /// What the schema is for (not used).
    #[allow(dead_code)]
    pub description: Option<String>,
    /// The JSON schema (absent: any JSON value).
    pub schema: Option<Value>,
    /// `true`: a keyword the constraint engine does not implement is an error; otherwise it
    /// is ignored. The output follows the schema either way.
    pub strict: Option<bool>,
}

/// Most bytes of a grammar's own text (a Lark grammar, the parameters of the tools in it).
pub const MAX_GRAMMAR_BYTES: usize = 256 << 10;

/// The grammar a request's output must follow, compiled for the served tokenizer.
pub struct StructuredOutput {
    /// The `llguidance` parser factory, built on first use (or why it could not be).
    factory: OnceLock<Result<Arc<ParserFactory>, String>>,
    /// Where grammars compile.
    compiles: Compiles,
}

/// Why a grammar could not be used.
#[derive(Debug)]
pub enum CompileError {
    /// The grammar itself: too large, not compilable, or not followable.
    Invalid(String),
    /// The compile did not end well (too slow, no room, the client left).
    Stopped(Stopped),
}

impl CompileError {
    /// The answer to a request whose field `param` (`what`) gave the grammar.
    pub fn into_api(self, param: &str, what: &str) -> ApiError {
        match self {
            Self::Invalid(e) => ApiError::invalid(
                param,
                format!("{what} cannot be used for constrained decoding: {e}"),
            ),
            Self::Stopped(Stopped::Late(deadline)) => ApiError::invalid(
                param,
                format!(
                    "{what} did not compile within {} s; simplify it (fewer properties, \
                     patterns and alternatives)",
                    deadline.as_secs_f64()
                ),
            ),
            Self::Stopped(Stopped::Busy) => {
                ApiError::unavailable("other requests' grammars are compiling; retry shortly", 1)
            }
            Self::Stopped(Stopped::Cancelled) => ApiError::unavailable("the client left", 0),
            Self::Stopped(Stopped::Failed(e)) => ApiError::invalid(
                param,
                format!("{what} cannot be used for constrained decoding: {e}"),
            ),
        }
    }
}

impl StructuredOutput {
    /// No factory yet: it is built from the tokenizer on the first constrained request.
    pub fn new() -> Self {
        Self::with_compiles(Compiles::default())
    }

    /// As [`Self::new`], compiling on `compiles`.
    pub fn with_compiles(compiles: Compiles) -> Self {
        Self {
            factory: OnceLock::new(),
            compiles,
        }
    }

    /// The constraint `format` asks for (`None` for plain text), for a model whose logits rows
    /// have `vocab` entries.
    pub fn constraint(
        &self,
        format: Option<&ResponseFormat>,
        tokenizer: &Tokenizer,
        vocab: usize,
        cancel: &CancelFlag,
    ) -> Result<Option<Arc<dyn TokenConstraint>>, ApiError> {
        let Some(grammar) = format_grammar(format)? else {
            return Ok(None);
        };
        self.compile(grammar, tokenizer, vocab, cancel)
            .map(|c| Some(Arc::new(c) as Arc<dyn TokenConstraint>))
            .map_err(|e| e.into_api("response_format", "the JSON schema"))
    }

    /// Compiles `grammar` for the served tokenizer on a compile thread, within the deadline,
    /// and tries its first step.
    pub fn compile(
        &self,
        grammar: TopLevelGrammar,
        tokenizer: &Tokenizer,
        vocab: usize,
        cancel: &CancelFlag,
    ) -> Result<GrammarConstraint, CompileError> {
        let text: usize = grammar
            .grammars
            .iter()
            .map(|g| g.lark_grammar.as_ref().map_or(0, String::len))
            .sum();
        if text > MAX_GRAMMAR_BYTES {
            return Err(CompileError::Invalid(format!(
                "its grammar is larger than {} KiB",
                MAX_GRAMMAR_BYTES >> 10
            )));
        }
        for schema in grammar
            .grammars
            .iter()
            .filter_map(|g| g.json_schema.as_ref())
        {
            schema_limits::check(schema).map_err(CompileError::Invalid)?;
        }
        let factory = self
            .factory
            .get_or_init(|| parser_factory(tokenizer, vocab).map(Arc::new))
            .clone()
            .map_err(CompileError::Invalid)?;
        self.compile_with(factory, grammar, cancel)
    }

    /// [`Self::compile`] with `factory`, whatever vocabulary it has.
    pub(crate) fn compile_with(
        &self,
        factory: Arc<ParserFactory>,
        grammar: TopLevelGrammar,
        cancel: &CancelFlag,
    ) -> Result<GrammarConstraint, CompileError> {
        let parser = self
            .compiles
            .run(move || first_step(&factory, grammar), cancel)
            .map_err(CompileError::Stopped)?
            .map_err(CompileError::Invalid)?;
        Ok(GrammarConstraint {
            parser: Mutex::new(parser),
        })
    }
}

/// `grammar` compiled, its first step's mask computed once: a grammar the engine cannot
/// follow from its start (a `$ref` cycle, a row past the engine's limits) fails here, before
/// any sequence runs.
fn first_step(factory: &ParserFactory, grammar: TopLevelGrammar) -> Result<TokenParser, String> {
    let parser = factory.create_parser(grammar).map_err(|e| e.to_string())?;
    let mut probe = Matcher::new(Ok(parser.deep_clone()));
    probe.compute_mask().map_err(|e| e.to_string())?;
    Ok(parser)
}

/// The grammar of `format` (`None` for plain text), its schema held to the size caps.
pub(crate) fn format_grammar(
    format: Option<&ResponseFormat>,
) -> Result<Option<TopLevelGrammar>, ApiError> {
    let (schema, strict) = match format {
        None | Some(ResponseFormat::Text) => return Ok(None),
        Some(ResponseFormat::JsonObject) => (json!({"type": "object"}), false),
        Some(ResponseFormat::JsonSchema { json_schema }) => (
            json_schema.schema.clone().unwrap_or_else(|| json!({})),
            json_schema.strict.unwrap_or(false),
        ),
    };
    schema_limits::check(&schema).map_err(|e| {
        ApiError::invalid(
            "response_format",
            format!("the JSON schema is too large to follow: {e}"),
        )
    })?;
    Ok(Some(TopLevelGrammar::from_json_schema(compact(
        schema, strict,
    )?)))
}

/// A parser factory for a vocabulary of the 256 single bytes and an end token (for the fuzz
/// target, which has no model).
pub(crate) fn byte_factory() -> Result<ParserFactory, String> {
    let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    words.push(vec![TokTrie::SPECIAL_TOKEN_MARKER, b'e', b'o', b's']);
    let info = TokRxInfo::new(words.len() as u32, 256);
    factory_of(&info, &words)
}

/// `schema` with the constraint engine's options: compact JSON, and unknown keywords an error
/// only when `strict`.
fn compact(mut schema: Value, strict: bool) -> Result<Value, ApiError> {
    let Some(object) = schema.as_object_mut() else {
        return match schema {
            Value::Bool(_) => Ok(schema),
            _ => Err(ApiError::invalid(
                "response_format",
                "`response_format.json_schema.schema` must be a JSON object",
            )),
        };
    };
    object.insert(
        "x-guidance".into(),
        json!({"whitespace_flexible": false, "lenient": !strict}),
    );
    Ok(schema)
}

/// The token trie of `tokenizer` as `llguidance` wants it: each token's bytes, control and
/// other non-text tokens marked special (`0xFF` + name, never matched by text), rows of the
/// logits beyond the vocabulary empty (never allowed).
fn parser_factory(tokenizer: &Tokenizer, vocab: usize) -> Result<ParserFactory, String> {
    let eos = tokenizer
        .eot()
        .or(tokenizer.eos())
        .or(tokenizer.eog_ids().first().copied())
        .ok_or("the model's vocabulary has no end-of-generation token")?;
    let words: Vec<Vec<u8>> = (0..vocab as u32)
        .map(|id| token_bytes(tokenizer, id))
        .collect();
    let info = TokRxInfo {
        tok_bos: tokenizer.bos(),
        tok_end_of_turn: tokenizer.eot(),
        ..TokRxInfo::new(vocab as u32, eos)
    };
    factory_of(&info, &words)
}

/// The parser factory of the tokens `words` (by id) described by `info`.
fn factory_of(info: &TokRxInfo, words: &[Vec<u8>]) -> Result<ParserFactory, String> {
    let env: TokEnv = Arc::new(ApproximateTokEnv::new(TokTrie::from(info, words)));
    let mut factory = ParserFactory::new(&env, InferenceCapabilities::default(), &[])
        .map_err(|e| e.to_string())?;
    factory.quiet();
    Ok(factory)
}

fn token_bytes(tokenizer: &Tokenizer, id: u32) -> Vec<u8> {
    let piece = tokenizer.token_piece(id).unwrap_or_default();
    match tokenizer.token_type(id) {
        None => Vec::new(),
        Some(TokenType::Normal | TokenType::Byte | TokenType::UserDefined)
            if !tokenizer.is_eog(id) =>
        {
            piece.to_vec()
        }
        Some(_) => {
            let mut special = vec![TokTrie::SPECIAL_TOKEN_MARKER];
            special.extend_from_slice(tokenizer.token_text(id).unwrap_or_default().as_bytes());
            special
        }
    }
}

/// A compiled grammar; each sequence gets its own copy of the parser.
pub struct GrammarConstraint {
    parser: Mutex<TokenParser>,
}

impl std::fmt::Debug for GrammarConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GrammarConstraint")
    }
}

impl TokenConstraint for GrammarConstraint {
    fn start(&self) -> Box<dyn ConstraintMatcher> {
        let parser = self
            .parser
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .deep_clone();
        Box::new(GrammarMatcher {
            matcher: Matcher::new(Ok(parser)),
            failure: None,
        })
    }
}

/// One sequence's place in its grammar.
struct GrammarMatcher {
    matcher: Matcher,
    /// Why the grammar engine failed, once it did.
    failure: Option<String>,
}

impl ConstraintMatcher for GrammarMatcher {
    fn mask(&mut self, logits: &mut [f32]) {
        let eos = self
            .matcher
            .tok_env()
            .map(|env| env.tok_trie().eos_token() as usize);
        match self.matcher.compute_mask_or_eos() {
            Ok(allowed) => allowed.iter_unset_entries(|id| {
                if let Some(l) = logits.get_mut(id) {
                    *l = f32::NEG_INFINITY;
                }
            }),
            Err(error) => {
                // The grammar engine failed (a limit of its own): the sequence fails with the
                // reason; one token stays allowed, as the engine asks.
                tracing::warn!(%error, "constrained decoding failed; failing the sequence");
                self.failure
                    .get_or_insert_with(|| format!("constrained decoding failed: {error}"));
                for (id, l) in logits.iter_mut().enumerate() {
                    if eos.as_ref().ok() != Some(&id) {
                        *l = f32::NEG_INFINITY;
                    }
                }
            }
        }
    }

    fn accept(&mut self, token: u32) {
        if self.failure.is_some() {
            return;
        }
        if let Err(error) = self.matcher.consume_token(token) {
            tracing::warn!(%error, "constrained decoding refused a sampled token");
            self.failure = Some(format!("constrained decoding failed: {error}"));
        }
    }

    fn is_complete(&self) -> bool {
        self.matcher.is_stopped()
    }

    fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
}
