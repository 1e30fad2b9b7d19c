//! Incremental detokenization for streaming output.

use super::Tokenizer;

/// Turns generated ids into text as they arrive, never splitting a UTF-8 character.
///
/// A character can span several tokens (byte-fallback tokens `<0xE2> <0x82> <0xAC>` for `€`, or
/// byte-level BPE tokens that end mid-character). Bytes are held back until the character is
/// complete; bytes that can never become valid UTF-8 are emitted as U+FFFD. Control tokens and media
/// markers print nothing, as in [`Tokenizer::decode`]; unlike `decode`, no leading space is removed and no
/// spaces are cleaned up, since a stream is usually the continuation of a prompt. The control
/// tokens a decoder is told to show ([`StreamDecoder::showing`]) print as their text, for a
/// reader of the output that needs them (gpt-oss's `<|channel|>` markup).
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    /// Bytes received but not yet returned: the start of an incomplete character.
    pending: Vec<u8>,
    /// Control tokens printed as their text, ascending.
    shown: Vec<u32>,
}

impl<'a> StreamDecoder<'a> {
    pub(crate) fn new(tokenizer: &'a Tokenizer) -> Self {
        StreamDecoder {
            tokenizer,
            pending: Vec::new(),
            shown: Vec::new(),
        }
    }

    /// The same decoder, printing the tokens `shown` as their text even where they are control
    /// tokens (which print as nothing otherwise).
    pub fn showing(mut self, shown: &[u32]) -> Self {
        self.shown = shown.to_vec();
        self.shown.sort_unstable();
        self.shown.dedup();
        self
    }

    /// Adds one token; returns the text that became complete, if any.
    pub fn push(&mut self, id: u32) -> Option<String> {
        let piece = match self.shown.binary_search(&id) {
            Ok(_) => self.tokenizer.token_piece(id).unwrap_or_default(),
            Err(_) => self.tokenizer.visible_piece(id),
        };
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).unwrap_or_default());
                    match e.error_len() {
                        // An incomplete character at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            break;
                        }
                        // Bytes that no continuation can repair.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + bad);
                        }
                    }
                }
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// Whether bytes of an unfinished character are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Ends the stream: whatever is held back, with an unfinished character as U+FFFD.
    pub fn finish(mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        (!rest.is_empty()).then(|| String::from_utf8_lossy(&rest).into_owned())
    }
}
