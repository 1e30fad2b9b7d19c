//! Read-only memory maps of model files.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

/// Maps `path` read-only into memory.
///
/// The map is private to this process; a model file changed underneath a running process is
/// outside what rinfer supports, as in every mmap-based engine.
pub(crate) fn map_file(path: &Path) -> std::io::Result<Mmap> {
    let file = File::open(path)?;
    // SAFETY: the map is read-only and we never hand out mutable access. Another process
    // truncating or rewriting the file while it is mapped is the one hazard, and like
    // llama.cpp we document it rather than copy multi-gigabyte weights into memory.
    unsafe { Mmap::map(&file) }
}
