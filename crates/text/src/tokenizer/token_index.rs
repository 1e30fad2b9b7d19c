//! Text → id lookup over the vocabulary's own token texts: the table holds only ids, so a
//! 262 144-token vocabulary costs about a megabyte here instead of a second copy of its texts.

use std::hash::{BuildHasher, RandomState};

use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::token::TokenData;

/// The ids of `tokens`, found by text.
#[derive(Clone, Debug, Default)]
pub(crate) struct TokenIndex {
    table: HashTable<u32>,
    hasher: RandomState,
}

impl TokenIndex {
    /// Indexes `tokens`; a text listed twice maps to its last id, as in llama.cpp.
    pub(crate) fn new(tokens: &[TokenData]) -> Self {
        let hasher = RandomState::new();
        let mut table = HashTable::with_capacity(tokens.len());
        let text = |id: u32| tokens[id as usize].text.as_str();
        for (id, t) in (0u32..).zip(tokens) {
            let hash = hasher.hash_one(t.text.as_str());
            let entry = table.entry(
                hash,
                |&other| text(other) == t.text,
                |&other| hasher.hash_one(text(other)),
            );
            match entry {
                Entry::Occupied(mut e) => *e.get_mut() = id,
                Entry::Vacant(e) => {
                    e.insert(id);
                }
            }
        }
        TokenIndex { table, hasher }
    }

    /// The id of `text` among the `tokens` this index was built from.
    pub(crate) fn get(&self, tokens: &[TokenData], text: &str) -> Option<u32> {
        let hash = self.hasher.hash_one(text);
        self.table
            .find(hash, |&id| tokens[id as usize].text == text)
            .copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::vocab::TokenType;

    fn tokens(texts: &[&str]) -> Vec<TokenData> {
        texts
            .iter()
            .map(|t| TokenData {
                text: (*t).to_owned(),
                score: 0.0,
                ty: TokenType::Normal,
                lstrip: false,
                rstrip: false,
            })
            .collect()
    }

    #[test]
    fn finds_every_text_and_the_last_of_duplicates() {
        let t = tokens(&["a", "b", "", "a", "▁the"]);
        let index = TokenIndex::new(&t);
        assert_eq!(index.get(&t, "a"), Some(3));
        assert_eq!(index.get(&t, "b"), Some(1));
        assert_eq!(index.get(&t, ""), Some(2));
        assert_eq!(index.get(&t, "▁the"), Some(4));
        assert_eq!(index.get(&t, "c"), None);
    }
}
