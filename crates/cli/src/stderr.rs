//! Writing messages to stderr, where a closed or broken stderr loses the message instead of
//! panicking as `eprintln!` does.

use std::fmt;
use std::io::Write;

/// Writes one line to stderr like `eprintln!`, ignoring failures: a closed stderr must not turn
/// a message (or an error report) into a panic.
macro_rules! report {
    ($($arg:tt)*) => {
        $crate::stderr::line(format_args!($($arg)*))
    };
}
pub(crate) use report;

/// Writes `args` and a newline to stderr; errors are dropped.
pub fn line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}
