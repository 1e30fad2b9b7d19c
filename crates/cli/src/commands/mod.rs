//! One module per subcommand, each with a `run` entry point, and `session`: the model, thread
//! pool and engine the computing subcommands share.

pub mod chat;
pub mod convert;
pub mod embed;
pub mod fetch;
pub mod imatrix;
pub mod inspect;
pub mod logits;
pub mod output_file;
pub mod pull;
pub mod quantize;
pub mod rerank;
pub mod run;
pub mod serve;
pub mod session;
pub mod tokenize;
