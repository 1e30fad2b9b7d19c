//! Every command-line flag, parsed once into plain structs that the commands receive.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Everything given on the command line (`about` comes from the crate description).
#[derive(Parser)]
#[command(name = "rinfer", version, about)]
pub struct Options {
    /// What to do.
    #[command(subcommand)]
    pub command: CommandOptions,
}

/// The subcommands.
#[derive(Subcommand)]
pub enum CommandOptions {
    /// Download the default model (Gemma 3 270M Q4_K_M) into the cache and print its path.
    Fetch,
    /// Show what a model file holds: header, metadata and tensors.
    Inspect(InspectOptions),
}

/// Options of `rinfer inspect`.
#[derive(Args)]
pub struct InspectOptions {
    /// The model file; the default model (fetched on first use) when left out.
    pub path: Option<PathBuf>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// List every tensor (always included in JSON).
    #[arg(long)]
    pub tensors: bool,
}
