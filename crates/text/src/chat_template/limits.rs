//! Bounds on what a chat template may do. A GGUF's template is code from the model's author; it
//! must not be able to exhaust the memory, the CPU or the patience of whoever renders it.

use std::io;
use std::time::Duration;

use minijinja::value::Value;
use minijinja::{Error, ErrorKind};

/// What one render of a chat template may use.
///
/// The defaults leave real templates (a few hundred steps per message) several orders of
/// magnitude of room, and stop a hostile one within about a second and a few hundred megabytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenderLimits {
    /// minijinja's fuel: one unit per instruction, plus one per 64 bytes of data the template
    /// creates or writes. Bounds the time of a render and the memory it can allocate (about
    /// `fuel * 64` bytes).
    pub fuel: u64,
    /// The most bytes the template may write.
    pub max_output_bytes: usize,
    /// The most items one `range()` may give.
    pub max_range: usize,
    /// How deep macros, loops and blocks may nest.
    pub recursion: usize,
    /// How long [`super::ChatTemplate::render_tokens`] waits for the template (rendered on a
    /// worker thread, so that the caller gets an error instead of waiting on it).
    pub deadline: Duration,
}

impl Default for RenderLimits {
    fn default() -> Self {
        RenderLimits {
            fuel: 5_000_000,
            max_output_bytes: 64 << 20,
            max_range: 100_000,
            recursion: 100,
            deadline: Duration::from_secs(5),
        }
    }
}

/// Collects the output up to a cap; past it every write fails and `overflowed` is set.
pub(crate) struct CappedOutput {
    pub bytes: Vec<u8>,
    limit: usize,
    pub overflowed: bool,
}

impl CappedOutput {
    pub(crate) fn new(limit: usize) -> Self {
        CappedOutput {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl io::Write for CappedOutput {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.bytes.len() + buf.len() > self.limit {
            self.overflowed = true;
            return Err(io::Error::other("chat template output cap reached"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// minijinja's `range` with at most `max` items.
pub(crate) fn bounded_range(
    max: usize,
) -> impl Fn(isize, Option<isize>, Option<isize>) -> Result<Value, Error> + Send + Sync + 'static {
    move |lower, upper, step| {
        let (start, end) = match upper {
            Some(upper) => (lower as i128, upper as i128),
            None => (0, lower as i128),
        };
        let step = step.unwrap_or(1) as i128;
        let items = match step {
            0 => 0,
            s if s > 0 => (end - start + s - 1).max(0) / s,
            s => (start - end - s - 1).max(0) / -s,
        };
        if items > max as i128 {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("range() of {items} items is over the limit of {max}"),
            ));
        }
        minijinja::functions::range(lower, upper, Some(step as isize))
    }
}
