//! Constrained decoding: a rule (a JSON schema, a grammar) that limits which tokens a sequence
//! may generate, applied to each logits row just before sampling. A front end builds the rule;
//! the engine only asks it, token by token, what may come next. Sequences without one pay
//! nothing.

use std::fmt;

/// A rule generated text must follow, shared by the requests that use it.
pub trait TokenConstraint: Send + Sync + fmt::Debug {
    /// A fresh matcher for one sequence, at the start of its generated text.
    fn start(&self) -> Box<dyn ConstraintMatcher>;
}

/// One sequence's progress through its [`TokenConstraint`].
pub trait ConstraintMatcher: Send {
    /// Sets the logits of the tokens not allowed next to negative infinity. At least one token
    /// stays allowed: an end-of-generation token once the text is complete.
    fn mask(&mut self, logits: &mut [f32]);

    /// Records that `token` was generated.
    fn accept(&mut self, token: u32);

    /// Whether the text is complete and nothing may follow it: the sequence then ends as if
    /// it had generated an end-of-generation token.
    fn is_complete(&self) -> bool;

    /// Why the rule could not be followed, once it could not (the rule's engine hit a limit of
    /// its own): the sequence then fails with this reason instead of finishing.
    fn failure(&self) -> Option<&str> {
        None
    }
}
