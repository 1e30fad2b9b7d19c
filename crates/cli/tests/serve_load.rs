//! A bounded load test of `rinfer serve` on a tiny fixture model: many concurrent clients,
//! streaming and not, with malformed requests mixed in, get zero errors, and the server's
//! memory does not grow from one round to the next (its prefix cache full and evicting).

mod serve_support;

use serde_json::{Value, json};
use serve_support::{Server, request, tiny_model};

const CLIENTS: usize = 32;
const REQUESTS_PER_CLIENT: usize = 6;

/// Runs one round: every client sends its requests one after another; returns the failures.
fn round(s: &Server, round: usize) -> Vec<String> {
    let addr = s.addr;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|client| {
                scope.spawn(move || {
                    let mut failures = Vec::new();
                    for i in 0..REQUESTS_PER_CLIENT {
                        let n = round * 1000 + client * REQUESTS_PER_CLIENT + i;
                        if let Some(failure) = one_request(addr, n) {
                            failures.push(failure);
                        }
                    }
                    failures
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("client thread"))
            .collect()
    })
}

/// Sends request number `n` (a mix of kinds) and checks its answer.
fn one_request(addr: std::net::SocketAddr, n: usize) -> Option<String> {
    let max_tokens = 4 + n % 13;
    let (path, body, stream) = match n % 4 {
        0 => (
            "/v1/completions",
            json!({"prompt": format!("Load {n}"), "max_tokens": max_tokens, "seed": n}),
            false,
        ),
        1 => (
            "/v1/completions",
            json!({"prompt": format!("Load {n}"), "max_tokens": max_tokens, "stream": true}),
            true,
        ),
        2 => (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": format!("Load {n}")}],
                   "max_tokens": max_tokens, "stream": true, "stream_options": {"include_usage": true}}),
            true,
        ),
        _ => {
            // A bad request beside the good ones must get its 400 and disturb nothing.
            let r = request(addr, "POST", "/v1/completions", b"{\"prompt\": [1,");
            return (r.status != 400).then(|| format!("malformed body got {}", r.status));
        }
    };
    let r = request(addr, "POST", path, body.to_string().as_bytes());
    if r.status != 200 {
        return Some(format!("{path} -> {}: {}", r.status, r.text()));
    }
    let generated = if stream {
        let events = r.events();
        if events.last().map(String::as_str) != Some("[DONE]") {
            return Some(format!("stream without [DONE]: {}", r.text()));
        }
        if r.has_error_event() {
            return Some(format!("error event: {}", r.text()));
        }
        let finished = events
            .iter()
            .filter_map(|e| serde_json::from_str::<Value>(e).ok())
            .any(|c| c["choices"][0]["finish_reason"].is_string());
        if !finished {
            return Some(format!("no finish reason: {}", r.text()));
        }
        return None;
    } else {
        r.json()["usage"]["completion_tokens"].as_u64()
    };
    // The tiny model may end early on an end-of-generation token, never run over.
    match generated {
        Some(g) if g >= 1 && g as usize <= max_tokens => None,
        other => Some(format!("completion_tokens {other:?} for max {max_tokens}")),
    }
}

#[test]
fn many_concurrent_clients_get_no_errors_and_memory_stays_flat() {
    let model = tiny_model();
    let s = Server::start(&[
        "--model",
        &model,
        "--ctx",
        "256",
        "--parallel",
        "8",
        "--queue",
        "64",
        "--threads",
        "2",
        // Small enough for the first round to fill the prefix cache, which then evicts.
        "--kv-cache-mib",
        "2",
    ]);
    // A first round warms every slot, buffer and allocator arena, and fills the prefix cache.
    let failures = round(&s, 0);
    assert!(failures.is_empty(), "{failures:#?}");
    let warm = s.rss_kib();
    for r in 1..3 {
        let failures = round(&s, r);
        assert!(failures.is_empty(), "{failures:#?}");
    }
    let after = s.rss_kib();
    // Generous slack for allocator noise; a leak of even a few KiB per request exceeds it.
    assert!(
        after <= warm + 8 * 1024,
        "RSS grew from {warm} KiB to {after} KiB over {} requests",
        2 * CLIENTS * REQUESTS_PER_CLIENT
    );
    assert_eq!(s.settled_metric("rinfer_running_sequences", 0.0), 0.0);
    assert!(s.metric("rinfer_prefix_cache_evictions_total") > 0.0);
    assert!(s.metric("rinfer_prefix_cache_bytes") <= (2 << 20) as f64);
    assert_eq!(s.settled_metric("rinfer_queue_depth", 0.0), 0.0);
    let total = 3 * CLIENTS * REQUESTS_PER_CLIENT;
    let metrics = s.get("/metrics").text();
    let count = |status: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with("rinfer_requests_total{endpoint=\"/v1/"))
            .filter(|l| l.contains(status))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert_eq!(
        count("status=\"200\"") + count("status=\"400\""),
        total as f64
    );
    assert_eq!(count("status=\"500\"") + count("status=\"503\""), 0.0);
}
