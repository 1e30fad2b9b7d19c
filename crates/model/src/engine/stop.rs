//! Stop strings in streamed text: what is safe to hand out, and where generation ends.

/// Finds stop strings in streamed text, holding back any tail that could start one.
///
/// ```
/// use rinfer_model::StopMatcher;
///
/// let mut stops = StopMatcher::new(vec!["END".into()]);
/// let mut out = String::new();
/// assert!(!stops.push("a E", &mut |t| out.push_str(t)));
/// assert_eq!(out, "a ");
/// assert!(stops.push("ND b", &mut |t| out.push_str(t)));
/// assert_eq!(out, "a ");
/// ```
pub struct StopMatcher {
    stops: Vec<String>,
    /// All text so far (cut at a stop string once found).
    pub(crate) text: String,
    /// Bytes of `text` already handed out.
    emitted: usize,
    pub(crate) stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings never match).
    pub fn new(stops: Vec<String>) -> Self {
        Self {
            stops,
            text: String::new(),
            emitted: 0,
            stopped: false,
        }
    }

    /// Adds `piece`; hands out what is safe; returns whether a stop string was found.
    pub fn push(&mut self, piece: &str, on_text: &mut impl FnMut(&str)) -> bool {
        let search_from = self.emitted;
        self.text.push_str(piece);
        let found = self
            .stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| {
                self.text[search_from..]
                    .find(s.as_str())
                    .map(|i| search_from + i)
            })
            .min();
        if let Some(at) = found {
            self.text.truncate(at);
            self.flush(on_text);
            self.stopped = true;
            return true;
        }
        let held = self
            .stops
            .iter()
            .map(|s| longest_prefix_suffix(&self.text[self.emitted..], s))
            .max()
            .unwrap_or(0);
        let safe = self.text.len() - held;
        if safe > self.emitted {
            on_text(&self.text[self.emitted..safe]);
            self.emitted = safe;
        }
        false
    }

    /// Hands out the text held back (at the end of a generation that did not stop on a string).
    pub fn flush(&mut self, on_text: &mut impl FnMut(&str)) {
        if self.text.len() > self.emitted {
            on_text(&self.text[self.emitted..]);
            self.emitted = self.text.len();
        }
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `stop`, on a char
/// boundary of `text`.
fn longest_prefix_suffix(text: &str, stop: &str) -> usize {
    let max = stop.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n)
                && stop
                    .as_bytes()
                    .starts_with(&text.as_bytes()[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(stops);
        let mut out = String::new();
        let mut stopped = false;
        for p in pieces {
            if m.push(p, &mut |t| out.push_str(t)) {
                stopped = true;
                break;
            }
        }
        if !stopped {
            m.flush(&mut |t| out.push_str(t));
        }
        (out, m.text, stopped)
    }

    #[test]
    fn stop_string_split_across_pieces_is_never_emitted() {
        let (out, text, stopped) = run(&["\n\nUser:"], &["Hello", "\n", "\nUs", "er:", " more"]);
        assert_eq!(
            (out.as_str(), text.as_str(), stopped),
            ("Hello", "Hello", true)
        );
    }

    #[test]
    fn a_false_start_is_released() {
        let (out, _, stopped) = run(&["END"], &["a E", "N", "x", "b"]);
        assert_eq!((out.as_str(), stopped), ("a ENxb", false));
    }
}
