//! One module per subcommand, each with a `run` entry point.

pub mod fetch;
pub mod inspect;
