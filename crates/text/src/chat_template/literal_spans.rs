//! Where the messages' own text lies in a rendered prompt, so that only the template's markup
//! is tokenized with control tokens.
//!
//! The template is rendered twice: with the messages (the prompt) and with a placeholder in
//! place of each message's text (the markup, which then holds no text of the user's). The prompt
//! is then matched piece by piece against the markup with each placeholder standing for the
//! message text as the template may have written it (as is, or trimmed as `| trim` and
//! `.strip()` do). When that accounts for the whole prompt, the prompt is used with the message
//! text marked literal. When it does not (a template that rewrites message text some other way),
//! the markup is used with each placeholder replaced by the message's text as given: the
//! rewriting is lost, the separation of markup and text is not.

use std::ops::Range;

use super::ChatMessage;

/// Opens a placeholder: a private-use character no template writes by itself.
const OPEN: char = '\u{F0000}';
/// Closes a placeholder.
const CLOSE: char = '\u{F0001}';

/// A rendered prompt and the byte ranges in it that are message text.
#[derive(Debug)]
pub(crate) struct PromptText {
    pub text: String,
    /// Sorted, not overlapping, not empty.
    pub literal: Vec<Range<usize>>,
}

/// The messages with each non-empty text replaced by its placeholder.
pub(crate) fn masked(messages: &[ChatMessage]) -> Vec<ChatMessage> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| ChatMessage {
            role: m.role.clone(),
            content: if m.content.is_empty() {
                String::new()
            } else {
                format!("{OPEN}{i}{CLOSE}")
            },
            extra: m.extra.clone(),
        })
        .collect()
}

/// A piece of the markup rendering.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Markup(&'a str),
    /// The text of message `i`.
    Message(usize),
}

/// Splits the markup rendering at its placeholders.
fn pieces(masked: &str, n_messages: usize) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = masked;
    let mut markup_start = 0;
    let mut offset = 0;
    while let Some(open) = rest.find(OPEN) {
        let after = &rest[open + OPEN.len_utf8()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let index = after[..digits].parse::<usize>().ok();
        let closed = after[digits..].starts_with(CLOSE);
        match index {
            Some(i) if closed && i < n_messages => {
                let at = offset + open;
                if markup_start < at {
                    out.push(Piece::Markup(&masked[markup_start..at]));
                }
                out.push(Piece::Message(i));
                let consumed = open + OPEN.len_utf8() + digits + CLOSE.len_utf8();
                offset += consumed;
                rest = &rest[consumed..];
                markup_start = offset;
            }
            _ => {
                let consumed = open + OPEN.len_utf8();
                offset += consumed;
                rest = &rest[consumed..];
            }
        }
    }
    if markup_start < masked.len() {
        out.push(Piece::Markup(&masked[markup_start..]));
    }
    out
}

/// The ways a template commonly writes a message's text, most faithful first.
fn variants(text: &str) -> [&str; 4] {
    [text, text.trim(), text.trim_start(), text.trim_end()]
}

/// Matches `rendered` against the pieces; the message ranges when it is all accounted for.
fn align(
    pieces: &[Piece<'_>],
    messages: &[ChatMessage],
    rendered: &str,
) -> Option<Vec<Range<usize>>> {
    let mut literal = Vec::new();
    let mut cursor = 0;
    for (k, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Markup(m) => {
                if !rendered[cursor..].starts_with(m) {
                    return None;
                }
                cursor += m.len();
            }
            Piece::Message(i) => {
                let rest = &rendered[cursor..];
                let fits = |v: &&str| {
                    rest.starts_with(*v)
                        && match pieces.get(k + 1) {
                            Some(Piece::Markup(next)) => rest[v.len()..].starts_with(next),
                            Some(Piece::Message(_)) => true,
                            None => v.len() == rest.len(),
                        }
                };
                let v = variants(&messages[*i].content).into_iter().find(fits)?;
                if !v.is_empty() {
                    literal.push(cursor..cursor + v.len());
                }
                cursor += v.len();
            }
        }
    }
    (cursor == rendered.len()).then_some(literal)
}

/// The prompt with its literal ranges: `rendered` when the markup accounts for all of it, else
/// the markup with the messages' text put in.
pub(crate) fn locate(messages: &[ChatMessage], rendered: String, masked: &str) -> PromptText {
    let pieces = pieces(masked, messages.len());
    if let Some(literal) = align(&pieces, messages, &rendered) {
        return PromptText {
            text: rendered,
            literal,
        };
    }
    let mut text = String::with_capacity(rendered.len());
    let mut literal = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Markup(m) => text.push_str(m),
            Piece::Message(i) => {
                let content = &messages[i].content;
                if !content.is_empty() {
                    literal.push(text.len()..text.len() + content.len());
                    text.push_str(content);
                }
            }
        }
    }
    PromptText { text, literal }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages() -> Vec<ChatMessage> {
        vec![ChatMessage::user("  hi <t> "), ChatMessage::assistant("yo")]
    }

    /// A stand-in for a template: `<t>` turns, the user's text trimmed.
    fn render(m: &[ChatMessage]) -> String {
        format!("<t>u\n{}<t>a\n{}<t>", m[0].content.trim(), m[1].content)
    }

    #[test]
    fn trimmed_text_is_found_in_the_prompt() {
        let m = messages();
        let p = locate(&m, render(&m), &render(&masked(&m)));
        assert_eq!(p.text, "<t>u\nhi <t><t>a\nyo<t>");
        let spans: Vec<&str> = p.literal.iter().map(|r| &p.text[r.clone()]).collect();
        assert_eq!(spans, ["hi <t>", "yo"]);
    }

    #[test]
    fn text_rewritten_otherwise_goes_in_as_given() {
        let m = messages();
        let upper = render(&m).to_uppercase();
        let p = locate(&m, upper, &render(&masked(&m)));
        assert_eq!(p.text, "<t>u\n  hi <t> <t>a\nyo<t>");
        let spans: Vec<&str> = p.literal.iter().map(|r| &p.text[r.clone()]).collect();
        assert_eq!(spans, ["  hi <t> ", "yo"]);
    }

    #[test]
    fn stray_placeholder_marks_stay_markup() {
        let masked = format!("a{OPEN}9{CLOSE}b{OPEN}x{OPEN}0{CLOSE}");
        let p = pieces(&masked, 1);
        assert_eq!(
            p,
            vec![
                Piece::Markup(&masked[..masked.find('b').unwrap() + 1 + OPEN.len_utf8() + 1]),
                Piece::Message(0)
            ]
        );
    }
}
