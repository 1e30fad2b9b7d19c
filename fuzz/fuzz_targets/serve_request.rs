//! Any request body handed to `rinfer serve`'s request layer (parsing and every check that
//! needs no model), for any endpoint, is accepted or refused with a 4xx error whose message is
//! not empty, never a panic; and the `Host` / `Origin` policy never panics on any header value.
//!
//! The first byte picks the endpoint; the rest is the body. Seeds in `corpus/serve_request`
//! follow the endpoints' schemas, and `serve_request.dict` holds their field names and values,
//! so that mutations stay close to real requests.

#![no_main]

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use rinfer_serve::fuzzing::{BodyEndpoint, check_body, check_host_and_origin};

/// The vocabulary and context of the default model (Gemma 3 270M at `--ctx 4096`).
const VOCAB: usize = 262_144;
const CONTEXT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let endpoint = match selector % 4 {
        0 => BodyEndpoint::Completions,
        1 => BodyEndpoint::Chat,
        2 => BodyEndpoint::Tokenize,
        _ => BodyEndpoint::Detokenize,
    };
    if let Err(refusal) = check_body(endpoint, body, VOCAB, CONTEXT) {
        assert!(
            (400..500).contains(&refusal.status),
            "status {} for a request: {}",
            refusal.status,
            refusal.message
        );
        assert!(!refusal.message.is_empty());
    }
    if selector >= 0xF0 {
        // The body's first two lines as a `Host` and an `Origin` value.
        let text = String::from_utf8_lossy(body);
        let mut lines = text.lines();
        let host = lines.next().unwrap_or_default();
        let origin = lines.next().unwrap_or_default();
        let listed = [host.to_string()];
        for address in ["127.0.0.1:8080", "0.0.0.0:8080", "[::1]:8080"] {
            let address: SocketAddr = address.parse().expect("an address");
            let (host_ok, origin_ok) = check_host_and_origin(address, &[], &[], host, origin);
            assert!(!origin_ok, "no origin is listed");
            let _ = host_ok;
            // A listed name (given without a port) is always served, a listed origin always
            // allowed.
            let (host_ok, origin_ok) =
                check_host_and_origin(address, &listed, &[origin.to_string()], host, origin);
            assert!(host_ok || host.contains([':', '[', ']']), "{host:?} is listed");
            assert!(origin_ok, "{origin:?} is listed");
        }
    }
});
