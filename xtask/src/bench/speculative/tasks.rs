//! The speculative bench's tasks, each a user turn and the kind of answer it asks for: a copy
//! of text it was given, an edit of it (the text with a few changes), or free writing. Every
//! input is written here (or read from the workspace) so that runs compare.

/// What the answer has to do with the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Repeat a given text.
    Copy,
    /// Repeat a given text with a few changes.
    Edit,
    /// Write without a text to follow.
    Free,
}

impl Kind {
    /// Its name in the bench's tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::Copy => "copy",
            Self::Edit => "edit",
            Self::Free => "free",
        }
    }
}

/// One task: its name, kind and prompt.
pub struct Task {
    pub name: &'static str,
    pub kind: Kind,
    /// The prompt: a user turn of the chat template, or raw text the model continues.
    pub ask: String,
    /// Whether `ask` is a user turn.
    pub chat: bool,
}

/// A raw prompt that shows `text`, then says what changes and begins the changed text (up to
/// and including the first change, `from` replaced by `to`), so that the model goes on with
/// the edit; even a small model follows an edit it has seen begun.
fn begun_edit(text: &str, fence: &str, change: &str, from: &str, to: &str) -> String {
    let edited = text.replace(from, to);
    let first = edited.find(to).map_or(0, |at| at + to.len());
    format!(
        "```{fence}\n{text}\n```\n\nThe same with {change}:\n\n```{fence}\n{}",
        &edited[..first]
    )
}

/// The file the rewrite task hands the model (read from the workspace by the bench).
pub const SOURCE_FILE: &str = "crates/model/src/engine/generate.rs";

const PASSAGE: &str = "The harbour town kept two calendars. The first was the church's, \
    printed each winter and pinned inside every kitchen door. The second was the sea's, which \
    nobody printed: the week the herring came, the night of the highest tide, the morning the \
    ice left the bay.\n\nWhen the two calendars disagreed, the town followed the sea. Weddings \
    moved, the school closed for a week each spring so that the children could help with the \
    nets, and once, in a year nobody forgot, the harvest festival was held in a fishing shed \
    because the square was under a foot of water.\n\nThe old harbour master kept notes on both \
    calendars for forty years, in a ledger that now sits in the library beside the door.";

/// A module that calls the function the edit renames many times.
const MODULE: &str = r#"use std::collections::HashMap;

pub struct Inventory {
    items: HashMap<String, u32>,
}

impl Inventory {
    pub fn new() -> Self {
        Self { items: HashMap::new() }
    }

    pub fn add(&mut self, name: &str, count: u32) {
        let entry = self.items.entry(name.to_string()).or_insert(0);
        *entry += count;
    }

    pub fn count_of(&self, name: &str) -> u32 {
        self.items.get(name).copied().unwrap_or(0)
    }

    pub fn remove(&mut self, name: &str, count: u32) -> bool {
        let held = self.count_of(name);
        if held < count {
            return false;
        }
        self.items.insert(name.to_string(), held - count);
        true
    }

    pub fn total(&self) -> u32 {
        self.items.keys().map(|name| self.count_of(name)).sum()
    }

    pub fn has(&self, name: &str) -> bool {
        self.count_of(name) > 0
    }
}

fn main() {
    let mut shop = Inventory::new();
    shop.add("apple", 3);
    shop.add("pear", 2);
    println!("apples: {}", shop.count_of("apple"));
    shop.remove("apple", 1);
    println!("apples: {}", shop.count_of("apple"));
    println!("pears: {}", shop.count_of("pear"));
    println!("total: {}", shop.total());
}
"#;

/// A document whose edit changes a few values.
const DOCUMENT: &str = r#"{
  "store": "North Street",
  "opened": "2019-04-12",
  "items": [
    { "id": 101, "name": "desk lamp", "price": 18.50, "in_stock": true, "shelf": "A3" },
    { "id": 102, "name": "notebook", "price": 2.25, "in_stock": true, "shelf": "B1" },
    { "id": 103, "name": "stapler", "price": 6.80, "in_stock": false, "shelf": "B2" },
    { "id": 104, "name": "desk chair", "price": 74.00, "in_stock": true, "shelf": "C1" },
    { "id": 105, "name": "paper clips", "price": 1.10, "in_stock": true, "shelf": "B2" },
    { "id": 106, "name": "wall clock", "price": 12.40, "in_stock": false, "shelf": "A1" },
    { "id": 107, "name": "pencil case", "price": 3.95, "in_stock": true, "shelf": "B1" },
    { "id": 108, "name": "bookshelf", "price": 89.00, "in_stock": true, "shelf": "C2" }
  ],
  "manager": { "name": "Ada Moss", "phone": "555-0142" }
}"#;

/// A story whose edit substitutes a few words.
const STORY: &str = "Every morning the baker opened the shop at six. The baker lit the oven, \
    swept the floor and set out the bread from the night before at half price. The first \
    customer was always the postman, who bought two rolls from the baker and told her the news \
    from the other end of the village. At seven the school children came for buns, and at \
    eight the farmers came to the baker for loaves to take to the fields. By noon the shelves \
    were empty, the oven was cold, and the baker sat by the window with her own coffee, \
    counting the coins. Everyone in the village agreed that the baker made the best bread in \
    the valley, and nobody could remember a morning when the baker had been late.";

/// The tasks, with `source` the text of [`SOURCE_FILE`].
pub fn tasks(source: &str) -> Vec<Task> {
    vec![
        Task {
            name: "rewrite a source file",
            kind: Kind::Copy,
            ask: format!(
                "Here is a Rust source file:\n\n```rust\n{source}```\n\nRewrite the whole file \
                 with the method `score` renamed to `score_tokens`. Output only the complete \
                 file."
            ),
            chat: true,
        },
        Task {
            name: "quote a passage",
            kind: Kind::Copy,
            ask: format!(
                "{PASSAGE}\n\nQuote the second and third paragraphs of the text above word for \
                 word."
            ),
            chat: true,
        },
        Task {
            name: "rename a method",
            kind: Kind::Edit,
            ask: begun_edit(
                MODULE,
                "rust",
                "the method `count_of` renamed to `quantity_in_stock`",
                "count_of",
                "quantity_in_stock",
            ),
            chat: false,
        },
        Task {
            name: "change values in JSON",
            kind: Kind::Edit,
            ask: begun_edit(
                DOCUMENT,
                "json",
                "every \"in_stock\" set to false",
                "\"in_stock\": true",
                "\"in_stock\": false",
            ),
            chat: false,
        },
        Task {
            name: "substitute a word",
            kind: Kind::Edit,
            ask: begun_edit(
                STORY,
                "text",
                "\"baker\" replaced by \"miller\"",
                "baker",
                "miller",
            ),
            chat: false,
        },
        Task {
            name: "free generation",
            kind: Kind::Free,
            ask: "Write a long story about a lighthouse keeper who finds a message in a bottle."
                .into(),
            chat: true,
        },
    ]
}
