//! Raw constraints, as vLLM and SGLang accept them: `grammar` (a Lark grammar as llguidance
//! reads it, `start` its first rule) and `regex` (the whole output matches it). Each compiles
//! through the same path as `response_format`; one that cannot compile is a 400 naming the
//! field, with llguidance's reason.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use rinfer_model::engine::TokenConstraint;

use crate::blocking::CancelFlag;
use crate::error::ApiError;
use crate::served::Served;
use crate::structured::ResponseFormat;

/// Longest `grammar` or `regex` in bytes.
const MAX_SOURCE_BYTES: usize = 64 << 10;

/// The constraint of a request's `grammar` or `regex` (`None` when it gives neither). They
/// exclude each other and `response_format`.
pub fn raw_constraint(
    grammar: Option<&str>,
    regex: Option<&str>,
    response_format: Option<&ResponseFormat>,
    served: &Served,
    vocab: usize,
    cancel: &CancelFlag,
) -> Result<Option<Arc<dyn TokenConstraint>>, ApiError> {
    let (field, grammar) = match (grammar, regex) {
        (None, None) => return Ok(None),
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "regex",
                "`grammar` and `regex` cannot be combined; send one",
            ));
        }
        (Some(g), None) => ("grammar", g),
        (None, Some(r)) => ("regex", r),
    };
    if !matches!(response_format, None | Some(ResponseFormat::Text)) {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` cannot be combined with `response_format`"),
        ));
    }
    if grammar.len() > MAX_SOURCE_BYTES {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` is over {MAX_SOURCE_BYTES} bytes"),
        ));
    }
    let top = match field {
        "grammar" => TopLevelGrammar::from_lark(grammar.to_string()),
        _ => TopLevelGrammar::from_regex(grammar),
    };
    let constraint = served
        .structured
        .compile(top, &served.ready.loaded.tokenizer, vocab, cancel)
        .map_err(|e| e.into_api(field, &format!("the {field}")))?;
    Ok(Some(Arc::new(constraint)))
}
