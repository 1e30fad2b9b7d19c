//! Writing a command's output to stdout, where a reader that has gone away (`| head`) ends
//! the output quietly instead of panicking as `println!` does.

use std::io::{ErrorKind, Write};

use anyhow::Result;

/// Writes `text` to stdout; a closed pipe is not an error.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
