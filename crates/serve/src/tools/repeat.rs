//! Ending a constrained list of calls when the model repeats one.
//!
//! Small models held to the call grammar (`tool_choice` `required` or a named function) often
//! write a call and then the same call again until `max_tokens`. The grammar allows the list
//! to end after any whole call; this wrapper around the call constraint ends it there: once a
//! call identical to an earlier one (same name, same arguments) is complete, the constraint
//! reports the text complete, and the sequence ends as if the model had ended it. The reader
//! ([`super::parse_calls`]) then drops the repeat, so the answer holds each call once and is
//! not cut by the limit.

use std::sync::Arc;

use rinfer_model::engine::{ConstraintMatcher, TokenConstraint};

use super::ToolFormat;
use super::parse::repeats_a_call;
use crate::scheduler::Ready;

/// A call constraint that also ends at the first repeated call.
pub struct RepeatGuard {
    inner: Arc<dyn TokenConstraint>,
    format: ToolFormat,
    /// The tokenizer's pieces, for the text of the tokens generated.
    ready: Arc<Ready>,
}

impl RepeatGuard {
    /// `inner` (the grammar of calls in `format`), ended at the first repeated call.
    pub fn new(inner: Arc<dyn TokenConstraint>, format: ToolFormat, ready: Arc<Ready>) -> Self {
        Self {
            inner,
            format,
            ready,
        }
    }
}

impl std::fmt::Debug for RepeatGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RepeatGuard({:?}, {:?})", self.format, self.inner)
    }
}

impl TokenConstraint for RepeatGuard {
    fn start(&self) -> Box<dyn ConstraintMatcher> {
        Box::new(RepeatMatcher {
            inner: self.inner.start(),
            format: self.format,
            ready: Arc::clone(&self.ready),
            text: Vec::new(),
            repeated: false,
        })
    }
}

struct RepeatMatcher {
    inner: Box<dyn ConstraintMatcher>,
    format: ToolFormat,
    ready: Arc<Ready>,
    /// The bytes generated so far.
    text: Vec<u8>,
    repeated: bool,
}

impl ConstraintMatcher for RepeatMatcher {
    fn mask(&mut self, logits: &mut [f32]) {
        self.inner.mask(logits);
    }

    fn accept(&mut self, token: u32) {
        self.inner.accept(token);
        let piece = self.ready.loaded.tokenizer.token_piece(token);
        let Some(piece) = piece else {
            return;
        };
        self.text.extend_from_slice(piece);
        // A call can only have just ended where an object or a marker closed.
        if !self.repeated && (piece.contains(&b'}') || piece.contains(&b'>')) {
            self.repeated = repeats_a_call(&String::from_utf8_lossy(&self.text), self.format);
        }
    }

    fn is_complete(&self) -> bool {
        self.repeated || self.inner.is_complete()
    }
}
