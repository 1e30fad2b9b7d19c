//! Byte progress of a download on stderr: a bar on a terminal, one line per stage otherwise.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar over a known number of bytes.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` bytes, drawn on stderr when it is a terminal.
    pub fn new(total: u64) -> Self {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{spinner} {msg:24} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec})",
        )
        .expect("the progress template is valid")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(120));
        Self { bar }
    }

    /// Names what is happening now (a line of its own when no bar is drawn).
    pub fn stage(&self, message: String) {
        if self.bar.is_hidden() {
            crate::stderr::report!("{message}");
        }
        self.bar.set_message(message);
    }

    /// Counts `bytes` more as done.
    pub fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    /// Takes back `bytes` counted as done that must be fetched again.
    pub fn retreat(&self, bytes: u64) {
        self.bar.dec(bytes);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
