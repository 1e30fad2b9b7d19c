//! The responses kept for `GET /v1/responses/{id}` and `previous_response_id`: in memory,
//! bounded in age and in bytes, the oldest evicted first.
//!
//! Each entry holds the response object and the conversation it ended (its input items,
//! earlier responses' included, then its output items), so a continuation needs no chain
//! walk. Its size is the length of both as JSON text; an entry larger than the whole budget
//! is not kept. Ids carry 128 random bits, so one client cannot guess another's.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a response is kept.
pub const MAX_AGE: Duration = Duration::from_secs(60 * 60);
/// The most bytes (as JSON text) all kept responses take together.
pub const MAX_BYTES: usize = 64 << 20;

/// One kept response.
#[derive(Clone)]
pub struct Stored {
    /// The response object, as `GET` returns it.
    pub response: Value,
    /// Its conversation: input items, then output items.
    pub items: Vec<Value>,
}

struct Entry {
    stored: Stored,
    at: Instant,
    bytes: usize,
}

/// The store.
pub struct ResponseStore {
    inner: Mutex<Inner>,
    max_age: Duration,
    max_bytes: usize,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Ids, oldest first (ids already removed are skipped when met).
    order: VecDeque<String>,
    bytes: usize,
}

impl Default for ResponseStore {
    fn default() -> Self {
        Self::new(MAX_AGE, MAX_BYTES)
    }
}

impl ResponseStore {
    /// A store keeping responses for `max_age`, within `max_bytes`.
    pub fn new(max_age: Duration, max_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            max_age,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `stored` under `id`, evicting the oldest entries to make room.
    pub fn put(&self, id: String, stored: Stored) {
        let bytes = stored.response.to_string().len()
            + stored
                .items
                .iter()
                .map(|i| i.to_string().len())
                .sum::<usize>();
        if bytes > self.max_bytes {
            return;
        }
        let mut inner = self.lock();
        self.expire(&mut inner, Instant::now());
        while inner.bytes + bytes > self.max_bytes {
            if !Self::evict_oldest(&mut inner) {
                break;
            }
        }
        inner.bytes += bytes;
        inner.order.push_back(id.clone());
        let entry = Entry {
            stored,
            at: Instant::now(),
            bytes,
        };
        if let Some(old) = inner.entries.insert(id, entry) {
            inner.bytes -= old.bytes;
        }
    }

    /// The response kept under `id`, unless it expired.
    pub fn get(&self, id: &str) -> Option<Stored> {
        let mut inner = self.lock();
        self.expire(&mut inner, Instant::now());
        inner.entries.get(id).map(|e| e.stored.clone())
    }

    /// Forgets `id`; whether it was kept.
    pub fn delete(&self, id: &str) -> bool {
        let mut inner = self.lock();
        match inner.entries.remove(id) {
            Some(entry) => {
                inner.bytes -= entry.bytes;
                true
            }
            None => false,
        }
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn expire(&self, inner: &mut Inner, now: Instant) {
        while let Some(id) = inner.order.front() {
            match inner.entries.get(id) {
                Some(entry) if now.duration_since(entry.at) < self.max_age => break,
                _ => {
                    Self::evict_oldest(inner);
                }
            }
        }
    }

    /// Removes the oldest entry; false when there is none.
    fn evict_oldest(inner: &mut Inner) -> bool {
        while let Some(id) = inner.order.pop_front() {
            if let Some(entry) = inner.entries.remove(&id) {
                inner.bytes -= entry.bytes;
                return true;
            }
        }
        false
    }
}

/// A fresh id: `prefix` and 128 random bits in hex.
pub fn random_id(prefix: &str) -> String {
    let mut bytes = [0u8; 16];
    // Without an OS random source, a hash of the time and a counter (still unique).
    if getrandom::fill(&mut bytes).is_err() {
        use sha2::{Digest, Sha256};
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let digest = Sha256::digest(format!("{nanos}-{n}"));
        bytes.copy_from_slice(&digest[..16]);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(n: usize) -> Stored {
        Stored {
            response: json!({"text": "x".repeat(n)}),
            items: Vec::new(),
        }
    }

    #[test]
    fn the_oldest_responses_go_first_when_the_bytes_run_out() {
        let store = ResponseStore::new(MAX_AGE, 100);
        store.put("a".into(), stored(30));
        store.put("b".into(), stored(30));
        assert!(store.get("a").is_some() && store.get("b").is_some());
        store.put("c".into(), stored(30));
        assert!(store.get("a").is_none(), "the oldest was evicted");
        assert!(store.get("b").is_some() && store.get("c").is_some());
        assert!(store.bytes() <= 100);
        // Too large to keep at all: nothing else is evicted for it.
        store.put("huge".into(), stored(200));
        assert!(store.get("huge").is_none() && store.get("c").is_some());
        assert!(store.delete("c") && !store.delete("c"));
        assert!(store.get("c").is_none());
    }

    #[test]
    fn responses_expire() {
        let store = ResponseStore::new(Duration::from_millis(30), MAX_BYTES);
        store.put("a".into(), stored(1));
        assert!(store.get("a").is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(store.get("a").is_none());
        assert_eq!(store.bytes(), 0);
    }

    #[test]
    fn ids_are_random() {
        let a = random_id("resp");
        assert!(a.starts_with("resp_") && a.len() == 5 + 32);
        assert_ne!(a, random_id("resp"));
    }
}
