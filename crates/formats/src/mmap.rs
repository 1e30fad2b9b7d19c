//! Read-only memory maps of model files.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

/// Maps `path` read-only into memory.
///
/// The map is private to this process; a model file changed underneath a running process is
/// outside what rinfer supports, as in every mmap-based engine.
pub(crate) fn map_file(path: &Path) -> std::io::Result<Mmap> {
    // Opening a FIFO blocks until a writer comes, and a device has no end: refuse both before
    // opening, and check again what was opened.
    let regular = |meta: std::fs::Metadata| match meta.is_file() {
        true => Ok(()),
        false => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory cannot be mapped)",
        )),
    };
    regular(std::fs::metadata(path)?)?;
    let file = File::open(path)?;
    regular(file.metadata()?)?;
    // SAFETY: the map is read-only and we never hand out mutable access. Another process
    // truncating or rewriting the file while it is mapped is the one hazard, and like
    // llama.cpp we document it rather than copy multi-gigabyte weights into memory.
    unsafe { Mmap::map(&file) }
}

/// Drops the whole pages inside `range` of `map` from this process's resident memory.
///
/// A hint: failures (an unsupported platform, a page size above 4 KiB that makes the start
/// unaligned) leave the pages resident, which is only less thrifty.
pub(crate) fn release_pages(map: &Mmap, range: std::ops::Range<usize>) {
    const PAGE: usize = 4096;
    let start = range.start.next_multiple_of(PAGE);
    let end = range.end.min(map.len()) / PAGE * PAGE;
    if end <= start {
        return;
    }
    #[cfg(unix)]
    {
        // SAFETY: the map is a private read-only mapping of a file we never write through, so
        // it has no copy-on-write pages: after MADV_DONTNEED any read of these bytes faults the
        // same file contents back in, and the slices borrowed from the map keep their values.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}
