//! Where the text being written continues earlier text: the searches prompt lookup guesses
//! from. A position `from` of the history stands for the occurrence that ends at `from - 1`;
//! its guess is `history[from..]`, and it matches as many last tokens of the history as the
//! tokens before `from` repeat.

/// The shortest run of last tokens a search of the whole history matches: a single repeated
/// token predicts too little when nothing else points at the place.
pub(super) const NGRAM_MIN: usize = 2;
/// The longest run of last tokens compared: longer matches count as this long.
pub(super) const MATCH_MAX: usize = 64;

/// An earlier occurrence of the history's last tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Match {
    /// The position after the occurrence: the start of its guess.
    pub(super) from: usize,
    /// How many last tokens it repeats (at most [`MATCH_MAX`]).
    pub(super) len: usize,
}

/// How many last tokens of `history` the tokens before `from` repeat, at most [`MATCH_MAX`].
fn matched(history: &[u32], from: usize) -> usize {
    let len = history.len();
    (1..=MATCH_MAX.min(from))
        .take_while(|&k| history[from - k] == history[len - k])
        .count()
}

/// The earlier occurrence of the history's last tokens that repeats the most of them (at least
/// [`NGRAM_MIN`]), the latest of the longest; `None` when none occurred.
pub(super) fn longest_match(history: &[u32]) -> Option<Match> {
    let last = *history.last()?;
    let mut best: Option<Match> = None;
    for from in (NGRAM_MIN..history.len()).rev() {
        if history[from - 1] != last {
            continue;
        }
        let len = matched(history, from);
        if len >= NGRAM_MIN && best.is_none_or(|b| len > b.len) {
            best = Some(Match { from, len });
            if len == MATCH_MAX {
                break;
            }
        }
    }
    best
}

/// The occurrence of the history's last token in the `window` positions after `at` (`from` in
/// `at + 1 ..= at + window`) that repeats the most last tokens, the nearest of those; `None`
/// when the last token is not there. Where a followed text diverged at `at`, this finds where
/// it continues after a change that inserted or dropped tokens.
pub(super) fn match_near(history: &[u32], at: usize, window: usize) -> Option<Match> {
    let last = *history.last()?;
    let end = history.len().min(at + window + 1);
    let mut best: Option<Match> = None;
    for from in at + 1..end {
        if history[from - 1] != last {
            continue;
        }
        let len = matched(history, from);
        if best.is_none_or(|b| len > b.len) {
            best = Some(Match { from, len });
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::{Match, longest_match, match_near};

    fn from(m: Option<Match>) -> Option<usize> {
        m.map(|m| m.from)
    }

    #[test]
    fn the_longest_match_is_the_latest_of_the_occurrences_that_repeat_the_most() {
        let history = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 2, 3];
        assert_eq!(longest_match(&history), Some(Match { from: 8, len: 2 }));
        assert_eq!(longest_match(&[1, 2, 3, 4]), None, "nothing repeats");
        assert_eq!(
            longest_match(&[5, 5, 5]),
            Some(Match { from: 2, len: 2 }),
            "an overlapping match"
        );
        assert_eq!(longest_match(&[]), None);
        // `8 9 1 2` occurred at the start; a later `1 2` is followed by something else.
        let history = [8, 9, 1, 2, 3, 4, 7, 1, 2, 6, 5, 8, 9, 1, 2];
        assert_eq!(from(longest_match(&history)), Some(4), "longer beats later");
        let copied = [history.as_slice(), &[3, 4, 7, 1, 2]].concat();
        assert_eq!(
            from(longest_match(&copied)),
            Some(9),
            "a copy in progress continues along its source"
        );
    }

    #[test]
    fn a_match_near_a_divergence_needs_only_the_last_token_and_prefers_more_then_nearer() {
        //              0  1  2  3  4  5  6  7  8  9
        let history = [1, 2, 3, 4, 5, 3, 6, 7, 8, 3];
        assert_eq!(
            match_near(&history, 1, 8),
            Some(Match { from: 3, len: 1 }),
            "the nearest single-token match"
        );
        assert_eq!(from(match_near(&history, 3, 8)), Some(6));
        assert_eq!(match_near(&history, 6, 8), None, "only after `at`");
        assert_eq!(match_near(&history, 0, 1), None, "only within the window");
        let history = [1, 2, 3, 4, 7, 3, 9, 7, 3];
        assert_eq!(
            match_near(&history, 0, 8),
            Some(Match { from: 6, len: 2 }),
            "`7 3` beats a nearer `3`"
        );
    }
}
