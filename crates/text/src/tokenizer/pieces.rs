//! Every token's bytes, stored end to end in one buffer (a `Vec` per token would cost about
//! 50 bytes of bookkeeping each, 13 MB for a 262 144-token vocabulary).

/// The pieces of a vocabulary, by id.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pieces {
    bytes: Vec<u8>,
    /// `ends[id]`: where piece `id` ends in `bytes`.
    ends: Vec<usize>,
}

impl Pieces {
    /// Piece `id`, if there is one.
    pub(crate) fn get(&self, id: usize) -> Option<&[u8]> {
        let end = *self.ends.get(id)?;
        let start = if id == 0 { 0 } else { self.ends[id - 1] };
        Some(&self.bytes[start..end])
    }
}

impl<P: AsRef<[u8]>> FromIterator<P> for Pieces {
    fn from_iter<I: IntoIterator<Item = P>>(iter: I) -> Self {
        let mut pieces = Pieces::default();
        for p in iter {
            pieces.bytes.extend_from_slice(p.as_ref());
            pieces.ends.push(pieces.bytes.len());
        }
        pieces.bytes.shrink_to_fit();
        pieces.ends.shrink_to_fit();
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_back_every_piece() {
        let p: Pieces = [&b"ab"[..], b"", b"\xff", b"cde"].into_iter().collect();
        assert_eq!(p.get(0), Some(&b"ab"[..]));
        assert_eq!(p.get(1), Some(&b""[..]));
        assert_eq!(p.get(2), Some(&b"\xff"[..]));
        assert_eq!(p.get(3), Some(&b"cde"[..]));
        assert_eq!(p.get(4), None);
    }
}
