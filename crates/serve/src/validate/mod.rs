//! Turning a parsed request into what the engine runs: every field checked against its range
//! and against the model, the prompt tokenized, the context respected. Nothing is clamped or
//! truncated silently; what cannot be honoured is a 400 naming the field.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rinfer_model::chat_template::{ChatMessage, ChatTemplateError};
use rinfer_model::engine::TokenConstraint;
use rinfer_model::tokenizer::TokenType;
use rinfer_model::{Request, SamplingParams, Tokenizer};
use serde_json::Value;

mod messages;

use crate::blocking::CancelFlag;
use crate::chat::ChatError;
use crate::error::ApiError;
use crate::request::{Endpoint, GenerationRequest};
use crate::schema_limits;
use crate::served::Served;
use crate::structured::ResponseFormat;
use crate::tools::{self, ChatOutput, Markup, ToolFormat, ToolPlan};

/// A request the engine can run, and how to answer it.
#[derive(Debug)]
pub struct Validated {
    /// What to generate.
    pub request: Request,
    /// Stream as server-sent events.
    pub stream: bool,
    /// Send a last chunk with the usage (streaming only).
    pub include_usage: bool,
    /// Choices to generate (`n`), each its own sequence; they share the prompt's blocks.
    pub choices: usize,
    /// Chat: how the answer is read back (reasoning, tool calls).
    pub output: Option<ChatOutput>,
}

impl Validated {
    /// How a chat answer is read back: its plan's, or plain text when it has none.
    pub fn chat_output(&self) -> ChatOutput {
        self.output
            .clone()
            .unwrap_or_else(|| ChatOutput::of_plan(None))
    }
}

/// Most choices one request may ask for (`n`).
pub const MAX_CHOICES: u64 = 16;

/// Most stop strings, as OpenAI allows.
const MAX_STOPS: usize = 4;
/// Longest stop string in bytes (matching costs grow with it on every token).
const MAX_STOP_BYTES: usize = 512;
/// Most alternatives per token.
const MAX_TOP_LOGPROBS: u64 = 20;
/// Most log-probabilities one answer may hold (choices × tokens × (alternatives + 1)): about
/// 60 MB of JSON.
pub const MAX_LOGPROB_ENTRIES: usize = 1 << 20;
/// Tokens `/v1/completions` generates when `max_tokens` is left out (OpenAI's default).
const DEFAULT_COMPLETION_TOKENS: usize = 16;

/// What a request asks for, checked without the model's tokenizer or chat template.
#[derive(Debug)]
pub struct Checked<'r> {
    /// Sampling.
    pub sampling: SamplingParams,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Alternatives per token when log-probabilities are wanted.
    pub logprobs: Option<usize>,
    /// Stream as server-sent events.
    pub stream: bool,
    /// Send a last chunk with the usage (streaming only).
    pub include_usage: bool,
    /// Whether the request may be decoded speculatively.
    pub speculate: bool,
    /// The prompt, still to tokenize or render.
    pub prompt: PromptInput<'r>,
}

/// A prompt as the request gives it.
#[derive(Debug)]
pub enum PromptInput<'r> {
    /// Completions text, tokenized with BOS.
    Text(&'r str),
    /// Completions token ids, checked against the vocabulary.
    Ids(Vec<u32>),
    /// A chat conversation, rendered with the chat template.
    Chat(Vec<ChatMessage>),
}

/// Checks `req` for `endpoint` and builds what the engine runs (tokenizing the prompt unless
/// `cancel` is set first).
pub fn validate(
    req: GenerationRequest,
    endpoint: Endpoint,
    served: &Served,
    cancel: &CancelFlag,
) -> Result<Validated, ApiError> {
    check_model(req.model.as_deref(), served)?;
    served.check_generates()?;
    let vocab = served.ready.loaded.model.config.vocab_size;
    let checked = check(&req, endpoint, vocab)?;
    let tool_format = served
        .chat
        .template()
        .map_or(ToolFormat::Generic, ToolFormat::of_template);
    let plan = ToolPlan::new(
        req.tools.as_deref(),
        req.tool_choice.as_ref(),
        req.parallel_tool_calls,
        tool_format,
    )?;
    let vars = template_vars(&req)?;
    let prompt = match checked.prompt {
        PromptInput::Text(text) => encode(served, text, true, true, "prompt", cancel)?,
        PromptInput::Ids(ids) => ids,
        PromptInput::Chat(messages) if tool_format.template_renders_tools() => {
            let tools = plan.as_ref().map(ToolPlan::template_tools);
            chat_prompt(&messages, tools.as_ref(), &vars, served, cancel)?
        }
        PromptInput::Chat(messages) => {
            let messages = tools::generic_conversation(messages, plan.as_ref());
            chat_prompt(&messages, None, &vars, served, cancel)?
        }
    };
    if prompt.is_empty() {
        return Err(ApiError::invalid(
            prompt_field(endpoint),
            "the prompt is empty",
        ));
    }
    let max_tokens = max_tokens(&req, endpoint, prompt.len(), served.ready.settings.context)?;
    let choices = req.n.unwrap_or(1) as usize;
    let parallel = served.ready.settings.max_sequences;
    if choices > parallel {
        return Err(ApiError::invalid(
            "n",
            format!(
                "n = {choices} is more than the {parallel} sequences this server runs at once \
                 (--parallel)"
            ),
        ));
    }
    if let Some(top) = checked.logprobs {
        let entries = choices.saturating_mul(max_tokens).saturating_mul(top + 1);
        if entries > MAX_LOGPROB_ENTRIES {
            return Err(ApiError::invalid(
                "logprobs",
                format!(
                    "n ({choices}) × max tokens ({max_tokens}) × (alternatives ({top}) + 1) is \
                     {entries} log-probabilities, more than the {MAX_LOGPROB_ENTRIES} one answer \
                     may hold; lower `max_tokens`, `n` or the alternatives"
                ),
            ));
        }
    }
    cancel.check()?;
    let raw = crate::grammar::raw_constraint(
        req.grammar.as_deref(),
        req.regex.as_deref(),
        req.response_format.as_ref(),
        served,
        vocab,
        cancel,
    )?;
    let constraint = match &plan {
        Some(plan) if plan.constrained() => {
            if raw.is_some() {
                return Err(ApiError::invalid(
                    "tool_choice",
                    "a `tool_choice` that requires a call cannot be combined with `grammar` or `regex`",
                ));
            }
            // Reasoning before a constrained call, unless the request turned it off.
            let reasoning = vars.get("enable_thinking") != Some(&Value::Bool(false))
                && vars.get("reasoning_effort").and_then(Value::as_str) != Some("none");
            call_constraint(
                plan,
                reasoning,
                req.response_format.as_ref(),
                served,
                vocab,
                cancel,
            )?
        }
        _ if raw.is_some() => raw,
        _ => served.structured.constraint(
            req.response_format.as_ref(),
            &served.ready.loaded.tokenizer,
            vocab,
            cancel,
        )?,
    };
    let chat = endpoint == Endpoint::Chat;
    let tokenizer = &served.ready.loaded.tokenizer;
    let markup = markup(tool_format, &prompt, tokenizer);
    let shown_controls = match chat {
        true => {
            let calls = match (markup, &plan) {
                (Markup::Harmony, _) | (_, Some(_)) => tool_format.markers(),
                _ => &[],
            };
            shown_controls(
                tokenizer,
                ["<think>", "</think>"]
                    .into_iter()
                    .chain(calls.iter().copied()),
            )
        }
        false => Vec::new(),
    };
    Ok(Validated {
        choices,
        request: Request {
            prompt,
            max_tokens,
            sampling: checked.sampling,
            stop: checked.stop,
            logprobs: checked.logprobs,
            // OpenAI's penalties count every generated token, and only those.
            penalize_prompt: false,
            constraint,
            speculate: checked.speculate,
            // Set as the request is queued, from its API key.
            tenant: 0,
            shown_controls,
            embed: false,
        },
        stream: checked.stream,
        include_usage: checked.include_usage,
        output: chat.then(|| ChatOutput::new(plan.as_ref(), markup)),
    })
}

/// How the answer of a chat prompt `prompt` marks its reasoning: harmony channels for a
/// harmony template, else `<think>` blocks, open from the start when the prompt ends by opening
/// one.
fn markup(format: ToolFormat, prompt: &[u32], tokenizer: &Tokenizer) -> Markup {
    if format == ToolFormat::Harmony {
        return Markup::Harmony;
    }
    let tail: Vec<u8> = prompt[prompt.len().saturating_sub(8)..]
        .iter()
        .flat_map(|&id| tokenizer.token_piece(id).unwrap_or_default())
        .copied()
        .collect();
    match String::from_utf8_lossy(&tail)
        .trim_end()
        .ends_with("<think>")
    {
        true => Markup::ThinkOpen,
        false => Markup::Think,
    }
}

/// The control tokens among `markers` (texts of the answer's markup), which the generated text
/// must show for the answer to be read back; the markup never reaches the client as text.
fn shown_controls<'m>(tokenizer: &Tokenizer, markers: impl Iterator<Item = &'m str>) -> Vec<u32> {
    markers
        .filter_map(|text| tokenizer.token_id(text))
        .filter(|&id| tokenizer.token_type(id) == Some(TokenType::Control))
        .collect()
}

/// The constraint of a `required` or named `tool_choice`: calls in the plan's format, their
/// arguments valid against the function's schema. `response_format` cannot be combined with
/// it. The schemas are held to the size caps of `schema_limits`, all together.
pub fn call_constraint(
    plan: &ToolPlan,
    reasoning: bool,
    response_format: Option<&ResponseFormat>,
    served: &Served,
    vocab: usize,
    cancel: &CancelFlag,
) -> Result<Option<Arc<dyn TokenConstraint>>, ApiError> {
    if !matches!(response_format, None | Some(ResponseFormat::Text)) {
        return Err(ApiError::invalid(
            "response_format",
            "`response_format` cannot be combined with a `tool_choice` that requires a call",
        ));
    }
    let schemas: Vec<Value> = plan.callable().map(|f| f.parameters()).collect();
    schema_limits::check_all(&schemas).map_err(|e| {
        ApiError::invalid(
            "tools",
            format!("the functions' parameter schemas are too large to follow: {e}"),
        )
    })?;
    let constraint = served
        .structured
        .compile(
            tools::call_grammar(plan, reasoning, &served.ready.loaded.tokenizer),
            &served.ready.loaded.tokenizer,
            vocab,
            cancel,
        )
        .map_err(|e| e.into_api("tools", "the functions' parameter schemas"))?;
    let constraint: Arc<dyn TokenConstraint> = Arc::new(constraint);
    Ok(Some(Arc::new(tools::RepeatGuard::new(
        constraint,
        plan.format,
        Arc::clone(&served.ready),
    ))))
}

/// Checks every field of `req` for `endpoint` but the model name, for a vocabulary of `vocab`
/// tokens; the prompt is left to tokenize.
pub fn check(
    req: &GenerationRequest,
    endpoint: Endpoint,
    vocab: usize,
) -> Result<Checked<'_>, ApiError> {
    if let Some(n) = req.n
        && !(1..=MAX_CHOICES).contains(&n)
    {
        return Err(ApiError::invalid(
            "n",
            format!("n = {n} is outside 1..={MAX_CHOICES}"),
        ));
    }
    // Fields of the other endpoint: (name, present).
    let foreign: &[(&str, bool)] = match endpoint {
        Endpoint::Completions => &[
            ("messages", req.messages.is_some()),
            ("max_completion_tokens", req.max_completion_tokens.is_some()),
            ("top_logprobs", req.top_logprobs.is_some()),
            ("tools", req.tools.is_some()),
            ("tool_choice", req.tool_choice.is_some()),
            ("parallel_tool_calls", req.parallel_tool_calls.is_some()),
            ("reasoning_effort", req.reasoning_effort.is_some()),
            ("chat_template_kwargs", req.chat_template_kwargs.is_some()),
        ],
        Endpoint::Chat => &[("prompt", req.prompt.is_some())],
    };
    if let Some((field, _)) = foreign.iter().find(|(_, present)| *present) {
        return Err(ApiError::invalid(
            *field,
            format!("unsupported field `{field}` for this endpoint"),
        ));
    }
    let sampling = sampling(req, vocab)?;
    let stop = stop(req.stop.as_ref())?;
    let logprobs = logprobs(req, endpoint)?;
    let stream = req.stream.unwrap_or(false);
    let include_usage = match &req.stream_options {
        Some(_) if !stream => {
            return Err(ApiError::invalid(
                "stream_options",
                "`stream_options` is only allowed when `stream` is true",
            ));
        }
        Some(options) => options.include_usage.unwrap_or(false),
        None => false,
    };
    let prompt = match endpoint {
        Endpoint::Completions => completion_input(req.prompt.as_ref(), vocab)?,
        Endpoint::Chat => PromptInput::Chat(messages::chat_messages(req.messages.as_deref())?),
    };
    Ok(Checked {
        sampling,
        stop,
        logprobs,
        stream,
        include_usage,
        speculate: req.speculate.unwrap_or(true),
        prompt,
    })
}

/// A request naming another model than the one served is refused.
pub fn check_model(model: Option<&str>, served: &Served) -> Result<(), ApiError> {
    match model {
        Some(m) if m != served.model_id => Err(ApiError::invalid(
            "model",
            format!(
                "the model `{m}` is not served here; this server serves `{}`",
                served.model_id
            ),
        )
        .with_code("model_not_found")),
        _ => Ok(()),
    }
}

fn prompt_field(endpoint: Endpoint) -> &'static str {
    match endpoint {
        Endpoint::Completions => "prompt",
        Endpoint::Chat => "messages",
    }
}

fn sampling(req: &GenerationRequest, vocab: usize) -> Result<SamplingParams, ApiError> {
    let defaults = SamplingParams::default();
    let top_k = match req.top_k {
        Some(k) if k > vocab as u64 => {
            return Err(ApiError::invalid(
                "top_k",
                format!("`top_k` = {k} exceeds the vocabulary of {vocab} tokens"),
            ));
        }
        Some(k) => k as usize,
        None => defaults.top_k,
    };
    let mut logit_bias = Vec::new();
    for (key, &bias) in req.logit_bias.iter().flatten() {
        let id = key
            .parse::<u32>()
            .ok()
            .filter(|&id| (id as usize) < vocab)
            .ok_or_else(|| {
                ApiError::invalid(
                    "logit_bias",
                    format!("`logit_bias` key {key:?} is not a token id below {vocab}"),
                )
            })?;
        if !(-100.0..=100.0).contains(&bias) {
            return Err(ApiError::invalid(
                "logit_bias",
                format!("`logit_bias` value {bias} for token {id} is outside [-100, 100]"),
            ));
        }
        logit_bias.push((id, bias));
    }
    let params = SamplingParams {
        temperature: req.temperature.unwrap_or(defaults.temperature),
        top_k,
        top_p: req.top_p.unwrap_or(defaults.top_p),
        min_p: req.min_p.unwrap_or(defaults.min_p),
        repeat_penalty: 1.0,
        frequency_penalty: req.frequency_penalty.unwrap_or(0.0),
        presence_penalty: req.presence_penalty.unwrap_or(0.0),
        penalty_last_n: defaults.penalty_last_n,
        logit_bias,
        seed: req.seed.map_or_else(random_seed, |s| s as u64),
    };
    // The ranges the command line applies too.
    params
        .validate()
        .map_err(|e| ApiError::invalid(e.field, e.to_string()))?;
    Ok(params)
}

/// A seed for a request that gave none: different requests sample differently.
fn random_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // SplitMix64 of the two, so that close clocks and counters give unrelated seeds.
    let mut z = nanos ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn stop(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let stops = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                ApiError::invalid("stop", "`stop` must be a string or an array of strings")
            })?,
        Some(_) => {
            return Err(ApiError::invalid(
                "stop",
                "`stop` must be a string or an array of strings",
            ));
        }
    };
    if stops.len() > MAX_STOPS {
        return Err(ApiError::invalid(
            "stop",
            format!("`stop` has {} strings; at most {MAX_STOPS}", stops.len()),
        ));
    }
    if stops.iter().any(String::is_empty) {
        return Err(ApiError::invalid(
            "stop",
            "`stop` strings must not be empty",
        ));
    }
    if stops.iter().any(|s| s.len() > MAX_STOP_BYTES) {
        return Err(ApiError::invalid(
            "stop",
            format!("`stop` strings must be at most {MAX_STOP_BYTES} bytes"),
        ));
    }
    Ok(stops)
}

fn logprobs(req: &GenerationRequest, endpoint: Endpoint) -> Result<Option<usize>, ApiError> {
    let top_range = |param: &str, n: u64| {
        if n > MAX_TOP_LOGPROBS {
            Err(ApiError::invalid(
                param,
                format!("`{param}` = {n} exceeds the maximum of {MAX_TOP_LOGPROBS}"),
            ))
        } else {
            Ok(n as usize)
        }
    };
    match endpoint {
        Endpoint::Completions => match &req.logprobs {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => {
                top_range("logprobs", n.as_u64().unwrap_or_default()).map(Some)
            }
            Some(_) => Err(ApiError::invalid(
                "logprobs",
                "`logprobs` must be a non-negative integer on /v1/completions",
            )),
        },
        Endpoint::Chat => {
            let wanted = match &req.logprobs {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => {
                    return Err(ApiError::invalid(
                        "logprobs",
                        "`logprobs` must be a boolean on /v1/chat/completions",
                    ));
                }
            };
            match (wanted, req.top_logprobs) {
                (false, Some(_)) => Err(ApiError::invalid(
                    "top_logprobs",
                    "`top_logprobs` needs `logprobs` set to true",
                )),
                (false, None) => Ok(None),
                (true, top) => top_range("top_logprobs", top.unwrap_or(0)).map(Some),
            }
        }
    }
}

/// Tokenizes `text` for the request field `param`, unless the request is cancelled.
///
/// The tokenizer runs to the end of the text once started: the body limit bounds its work.
pub fn encode(
    served: &Served,
    text: &str,
    add_special: bool,
    parse_special: bool,
    param: &str,
    cancel: &CancelFlag,
) -> Result<Vec<u32>, ApiError> {
    cancel.check()?;
    let tokens = served
        .ready
        .loaded
        .tokenizer
        .encode(text, add_special, parse_special)
        .map_err(|e| ApiError::invalid(param, e.to_string()))?;
    cancel.check()?;
    Ok(tokens)
}

/// The token ids `items` of the request field `param`, each a whole number below `vocab`;
/// `shape_error` is the error of an item that is not a whole number.
pub(crate) fn token_ids(
    param: &str,
    items: &[Value],
    vocab: usize,
    shape_error: impl Fn() -> ApiError,
) -> Result<Vec<u32>, ApiError> {
    items
        .iter()
        .map(|v| {
            let id = v.as_u64().ok_or_else(&shape_error)?;
            if id as usize >= vocab || id > u64::from(u32::MAX) {
                return Err(ApiError::invalid(
                    param,
                    format!("token id {id} is outside the vocabulary of {vocab} tokens"),
                ));
            }
            Ok(id as u32)
        })
        .collect()
}

fn completion_input(prompt: Option<&Value>, vocab: usize) -> Result<PromptInput<'_>, ApiError> {
    let shape_error = || {
        ApiError::invalid(
            "prompt",
            "`prompt` must be a string, an array of one string, or an array of token ids",
        )
    };
    let ids =
        |items: &[Value]| token_ids("prompt", items, vocab, shape_error).map(PromptInput::Ids);
    match prompt {
        None | Some(Value::Null) => Err(ApiError::invalid("prompt", "`prompt` is required")),
        Some(Value::String(text)) => Ok(PromptInput::Text(text)),
        Some(Value::Array(items)) => match items.as_slice() {
            [] => Err(ApiError::invalid("prompt", "the prompt is empty")),
            [Value::String(text)] => Ok(PromptInput::Text(text)),
            [Value::Array(inner)] => ids(inner),
            [Value::Number(_), ..] => ids(items),
            [_, _, ..] if items.iter().all(|v| v.is_string() || v.is_array()) => {
                Err(ApiError::invalid(
                    "prompt",
                    "only one prompt per request is supported; send one request per prompt",
                ))
            }
            _ => Err(shape_error()),
        },
        Some(_) => Err(shape_error()),
    }
}

/// The template variables a chat request adds: `chat_template_kwargs`, and `reasoning_effort`.
fn template_vars(req: &GenerationRequest) -> Result<serde_json::Map<String, Value>, ApiError> {
    const FIXED: [&str; 5] = [
        "messages",
        "tools",
        "bos_token",
        "eos_token",
        "add_generation_prompt",
    ];
    let mut vars = req.chat_template_kwargs.clone().unwrap_or_default();
    if let Some(name) = vars.keys().find(|k| FIXED.contains(&k.as_str())) {
        return Err(ApiError::invalid(
            format!("chat_template_kwargs.{name}"),
            format!("`{name}` is set by the server and cannot be given as a template variable"),
        ));
    }
    if let Some(effort) = &req.reasoning_effort {
        if !["none", "minimal", "low", "medium", "high"].contains(&effort.as_str()) {
            return Err(ApiError::invalid(
                "reasoning_effort",
                "`reasoning_effort` must be none, minimal, low, medium or high",
            ));
        }
        vars.insert("reasoning_effort".into(), Value::String(effort.clone()));
    }
    Ok(vars)
}

fn chat_prompt(
    messages: &[ChatMessage],
    tools: Option<&Value>,
    vars: &serde_json::Map<String, Value>,
    served: &Served,
    cancel: &CancelFlag,
) -> Result<Vec<u32>, ApiError> {
    cancel.check()?;
    let tokens = served
        .chat
        .render_tokens(&served.ready.loaded, messages, tools, vars, cancel)
        .map_err(|e| match e {
            ChatError::NoTemplate(message) => ApiError::invalid("messages", message),
            ChatError::Template(ChatTemplateError::Rejected(message)) => ApiError::invalid(
                "messages",
                format!("the chat template rejected the conversation: {message}"),
            ),
            ChatError::Template(ChatTemplateError::Tokenize(e)) => {
                ApiError::invalid("messages", e.to_string())
            }
            ChatError::Template(ChatTemplateError::OutputTooLarge { limit }) => ApiError::invalid(
                "messages",
                format!(
                    "the conversation, as the chat template renders it, is more than {limit} \
                     bytes, more than the context can hold"
                ),
            )
            .with_code("context_length_exceeded"),
            ChatError::Template(e @ ChatTemplateError::Busy { .. }) => {
                ApiError::unavailable(e.to_string(), 1)
            }
            ChatError::Template(other) => ApiError::internal(other.to_string()),
        })?;
    cancel.check()?;
    Ok(tokens)
}

/// The tokens to generate: what the request asks (or the endpoint's default), refused when the
/// prompt of `prompt` tokens and it do not fit the context.
pub fn max_tokens(
    req: &GenerationRequest,
    endpoint: Endpoint,
    prompt: usize,
    context: usize,
) -> Result<usize, ApiError> {
    let (param, asked) = match (req.max_completion_tokens, req.max_tokens) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::invalid(
                "max_completion_tokens",
                "`max_tokens` and `max_completion_tokens` disagree; send one of them",
            ));
        }
        (Some(a), _) => ("max_completion_tokens", Some(a)),
        (None, b) => ("max_tokens", b),
    };
    if prompt >= context {
        return Err(ApiError::invalid(
            prompt_field(endpoint),
            format!(
                "the prompt has {prompt} tokens, which leaves no room in the context of {context} tokens"
            ),
        )
        .with_code("context_length_exceeded"));
    }
    let asked = match (asked, endpoint) {
        (Some(0), _) => {
            return Err(ApiError::invalid(
                param,
                format!("`{param}` must be at least 1"),
            ));
        }
        (Some(n), _) => n,
        (None, Endpoint::Completions) => DEFAULT_COMPLETION_TOKENS.min(context - prompt) as u64,
        (None, Endpoint::Chat) => (context - prompt) as u64,
    };
    if (prompt as u64).saturating_add(asked) > context as u64 {
        return Err(ApiError::invalid(
            param,
            format!(
                "the prompt ({prompt} tokens) plus `{param}` ({asked}) exceeds the context of {context} tokens; \
                 lower `{param}` or shorten the prompt"
            ),
        )
        .with_code("context_length_exceeded"));
    }
    Ok(asked as usize)
}
