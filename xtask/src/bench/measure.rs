//! What the model bench measures: the tests both engines run and one measurement's result.

/// One test, named as llama-bench names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    /// Prompt processing: a prompt of this many tokens (BOS included) in one batch, in tok/s.
    Prompt(usize),
    /// Text generation: this many tokens decoded one at a time after a one-token prompt, in tok/s.
    Generate(usize),
    /// Seconds from process start until the first token of a short prompt, loading included.
    FirstToken,
}

/// Every test of the model bench, in the order they run.
pub const TESTS: [Test; 5] = [
    Test::Prompt(128),
    Test::Prompt(512),
    Test::Prompt(2048),
    Test::Generate(128),
    Test::FirstToken,
];

/// The prompt of [`Test::FirstToken`], the same text for every engine.
pub const FIRST_TOKEN_PROMPT: &str = "The quick brown fox jumps over the lazy dog.";

/// The context size of the first-token run, for every engine.
pub const FIRST_TOKEN_CONTEXT: usize = 4096;

impl Test {
    /// `pp128`, `tg128` or `first_token`.
    pub fn name(self) -> String {
        match self {
            Self::Prompt(n) => format!("pp{n}"),
            Self::Generate(n) => format!("tg{n}"),
            Self::FirstToken => "first_token".into(),
        }
    }

    /// The unit of the measured value.
    pub fn unit(self) -> &'static str {
        match self {
            Self::Prompt(_) | Self::Generate(_) => "tok/s",
            Self::FirstToken => "s",
        }
    }

    /// Whether a larger value is better (throughput) or worse (time).
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Self::FirstToken)
    }
}

/// One measurement: the value in the test's unit and the process's peak RSS.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// tok/s or seconds (see [`Test::unit`]).
    pub value: f64,
    /// Peak resident set size of the process, MiB.
    pub peak_rss_mib: f64,
    /// The share of the machine's CPU that other processes used meanwhile, 0 to 1.
    pub busy_elsewhere: f64,
}

impl Sample {
    /// A measurement of `value` made by the process `done`.
    pub fn of(value: f64, done: &super::child::Finished) -> Self {
        Self {
            value,
            peak_rss_mib: done.peak_rss_mib,
            busy_elsewhere: done.busy_elsewhere,
        }
    }
}
