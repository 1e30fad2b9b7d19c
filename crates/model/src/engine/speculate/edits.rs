//! The edits a text has made to the source it follows, so that an edit the text repeats (a
//! renamed identifier, a replaced word or value) is guessed from its second occurrence on:
//! where the source has an edit's old tokens, the text is expected to have its new ones.
//!
//! An edit is learned when the drafter, after a divergence, finds where the source continues
//! and the text confirms it: the source's tokens it skipped are the old ones, the text's tokens
//! since the divergence the new ones. An edit that the text does not make where the source
//! has its old tokens (it kept them) is forgotten.

/// The most edits remembered; a new one replaces the oldest.
const KEPT: usize = 4;
/// The most tokens an edit's old or new side may have.
pub(super) const LONGEST: usize = 16;

/// Where the source has `old`, the text has had `new`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Edit {
    old: Vec<u32>,
    new: Vec<u32>,
}

/// The edits learned so far, the latest first.
#[derive(Debug, Default)]
pub(super) struct Edits {
    edits: Vec<Edit>,
}

/// An edit's new tokens being repeated: those still to come, then the source goes on after
/// its old tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Replacing {
    new: [u32; LONGEST],
    len: usize,
    done: usize,
    /// How many source tokens the edit replaces.
    skip: usize,
}

/// A place in a source as the text repeats it: the source position of the next token, unless
/// the text is inside an edit's new tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Cursor {
    /// The source position the text continues from (after the edit, when inside one).
    pub(super) next: usize,
    replacing: Option<Replacing>,
}

impl Cursor {
    /// Before the source's position `next`.
    pub(super) fn at(next: usize) -> Self {
        Self {
            next,
            replacing: None,
        }
    }
}

impl Edits {
    /// Remembers that where a source had `old`, the text has `new` (unless either is empty or
    /// longer than [`LONGEST`], or they are the same).
    pub(super) fn learn(&mut self, old: &[u32], new: &[u32]) {
        let fits = |side: &[u32]| (1..=LONGEST).contains(&side.len());
        if !fits(old) || !fits(new) || old == new {
            return;
        }
        self.edits.retain(|e| e.old != old);
        self.edits.insert(
            0,
            Edit {
                old: old.to_vec(),
                new: new.to_vec(),
            },
        );
        self.edits.truncate(KEPT);
    }

    /// The edit whose old tokens begin at `at` of `source`, the latest of those.
    fn at(&self, source: &[u32], at: usize) -> Option<&Edit> {
        let rest = source.get(at..)?;
        self.edits.iter().find(|e| rest.starts_with(&e.old))
    }

    /// The token the text is expected to have at `cursor` of `source`: an edit's where the
    /// text is inside one or one begins there, else the source's (`None` past its end).
    pub(super) fn expected(&self, source: &[u32], cursor: Cursor) -> Option<u32> {
        if let Some(r) = cursor.replacing {
            return Some(r.new[r.done]);
        }
        match self.at(source, cursor.next) {
            Some(edit) => Some(edit.new[0]),
            None => source.get(cursor.next).copied(),
        }
    }

    /// The cursor after the [`expected`](Self::expected) token came.
    pub(super) fn advance(&self, source: &[u32], cursor: Cursor) -> Cursor {
        let replacing = match cursor.replacing {
            Some(r) => r,
            None => match self.at(source, cursor.next) {
                Some(edit) => {
                    let mut new = [0; LONGEST];
                    new[..edit.new.len()].copy_from_slice(&edit.new);
                    Replacing {
                        new,
                        len: edit.new.len(),
                        done: 0,
                        skip: edit.old.len(),
                    }
                }
                None => return Cursor::at(cursor.next + 1),
            },
        };
        let done = replacing.done + 1;
        match done == replacing.len {
            true => Cursor::at(cursor.next + replacing.skip),
            false => Cursor {
                next: cursor.next,
                replacing: Some(Replacing { done, ..replacing }),
            },
        }
    }

    /// The cursor after `token` came where the text was expected to begin an edit but kept
    /// the source's token instead; the edit is forgotten. `None` when that is not what
    /// happened.
    pub(super) fn kept(&mut self, source: &[u32], cursor: Cursor, token: u32) -> Option<Cursor> {
        if cursor.replacing.is_some() || source.get(cursor.next) != Some(&token) {
            return None;
        }
        let rest = &source[cursor.next..];
        let before = self.edits.len();
        self.edits.retain(|e| !rest.starts_with(&e.old));
        (self.edits.len() < before).then(|| Cursor::at(cursor.next + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::{Cursor, Edits, LONGEST};

    /// The tokens the text is expected to have from `cursor` on, at most `n`.
    fn follow(edits: &Edits, source: &[u32], mut cursor: Cursor, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        while out.len() < n {
            let Some(token) = edits.expected(source, cursor) else {
                break;
            };
            out.push(token);
            cursor = edits.advance(source, cursor);
        }
        out
    }

    #[test]
    fn a_learned_edit_replaces_its_old_tokens_wherever_the_source_has_them() {
        let source = [1, 2, 3, 4, 1, 2, 3, 5];
        let mut edits = Edits::default();
        assert_eq!(follow(&edits, &source, Cursor::at(0), 8), source);
        edits.learn(&[2, 3], &[7, 8, 9]);
        assert_eq!(
            follow(&edits, &source, Cursor::at(0), 20),
            [1, 7, 8, 9, 4, 1, 7, 8, 9, 5]
        );
        // From inside the old tokens the source goes on as it is.
        assert_eq!(follow(&edits, &source, Cursor::at(2), 3), [3, 4, 1]);
    }

    #[test]
    fn an_edit_the_text_does_not_make_is_forgotten() {
        let source = [1, 2, 3, 4];
        let mut edits = Edits::default();
        edits.learn(&[2], &[9]);
        let cursor = Cursor::at(1);
        assert_eq!(edits.expected(&source, cursor), Some(9));
        assert_eq!(edits.kept(&source, cursor, 5), None, "neither expected");
        assert_eq!(edits.kept(&source, cursor, 2), Some(Cursor::at(2)));
        assert_eq!(edits.expected(&source, cursor), Some(2));
    }

    #[test]
    fn only_short_different_sides_are_learned_and_the_latest_few_kept() {
        let mut edits = Edits::default();
        edits.learn(&[], &[1]);
        edits.learn(&[1], &[]);
        edits.learn(&[1], &[1]);
        edits.learn(&[1; LONGEST + 1], &[2]);
        assert!(edits.edits.is_empty());
        for old in 0..6 {
            edits.learn(&[old], &[old + 10]);
        }
        edits.learn(&[5], &[20]);
        let olds: Vec<u32> = edits.edits.iter().map(|e| e.old[0]).collect();
        assert_eq!(olds, [5, 4, 3, 2], "the latest first, one per old side");
        assert_eq!(edits.edits[0].new, [20]);
    }
}
