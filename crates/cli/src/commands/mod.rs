//! One module per subcommand, each with a `run` entry point.

pub mod chat;
pub mod fetch;
pub mod inspect;
pub mod logits;
pub mod run;
pub mod serve;
pub mod tokenize;
