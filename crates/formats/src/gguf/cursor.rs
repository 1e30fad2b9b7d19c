//! A bounds-checked little-endian reader over a byte slice.

use crate::error::{GgufError, Result};

/// Reads values front to back, failing with [`GgufError::Truncated`] instead of reading past the end.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// The offset of the next byte to read.
    pub(crate) fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
                what,
                offset: self.offset(),
                needed: n,
                available: self.remaining(),
            });
        }
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16> {
        self.array(what).map(u16::from_le_bytes)
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }
    pub(crate) fn f32(&mut self, what: &'static str) -> Result<f32> {
        self.array(what).map(f32::from_le_bytes)
    }
    pub(crate) fn f64(&mut self, what: &'static str) -> Result<f64> {
        self.array(what).map(f64::from_le_bytes)
    }

    /// Reads a count and checks that `count * min_item_bytes` could fit in the rest of the file,
    /// so that no caller ever allocates for a count the file cannot back.
    pub(crate) fn count(&mut self, what: &'static str, min_item_bytes: u64) -> Result<u64> {
        let offset = self.offset();
        let count = self.u64(what)?;
        let fits = count
            .checked_mul(min_item_bytes)
            .is_some_and(|bytes| bytes <= self.remaining());
        if !fits {
            return Err(GgufError::ImpossibleCount {
                what,
                count,
                offset,
                available: self.remaining(),
            });
        }
        Ok(count)
    }

    /// Reads a GGUF string: a u64 length then that many UTF-8 bytes.
    pub(crate) fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.count(what, 1)?;
        let offset = self.offset();
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| GgufError::InvalidUtf8 { what, offset })
    }
}
