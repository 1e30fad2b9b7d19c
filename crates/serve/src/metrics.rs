//! Counters, gauges and histograms, rendered in the Prometheus text format at `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Everything `/metrics` reports. Shared by the HTTP side and the engine thread.
#[derive(Default)]
pub struct Metrics {
    /// Responses by endpoint and status.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Prompt tokens of admitted requests.
    pub prompt_tokens: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Generations cancelled because the client went away.
    pub cancelled: AtomicU64,
    /// Requests waiting for a free sequence.
    pub queue_depth: AtomicI64,
    /// Sequences being prefilled or decoded.
    pub running: AtomicI64,
    /// KV cache positions in use, over all sequences.
    pub kv_used: AtomicI64,
    /// KV cache positions allocated, over all sequences.
    pub kv_capacity: AtomicI64,
    /// Seconds from a request's arrival to its first token.
    pub time_to_first_token: Histogram,
    /// Seconds between consecutive tokens of a sequence.
    pub inter_token_latency: Histogram,
}

/// Bucket bounds (seconds) shared by the latency histograms.
const LATENCY_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// A histogram over [`LATENCY_BUCKETS`].
#[derive(Default)]
pub struct Histogram {
    state: Mutex<HistogramState>,
}

#[derive(Default)]
struct HistogramState {
    /// Observations at most each bound (not cumulative).
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, seconds: f64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = LATENCY_BUCKETS.iter().position(|&b| seconds <= b) {
            s.buckets[i] += 1;
        }
        s.count += 1;
        s.sum += seconds;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, n) in LATENCY_BUCKETS.iter().zip(s.buckets) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", s.count);
        let _ = writeln!(out, "{name}_sum {}", s.sum);
        let _ = writeln!(out, "{name}_count {}", s.count);
    }
}

impl Metrics {
    /// Counts one response.
    pub fn record_request(&self, endpoint: &str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((endpoint.to_string(), status)).or_default() += 1;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP rinfer_requests_total HTTP responses by endpoint and status.\n\
             # TYPE rinfer_requests_total counter"
        );
        for ((endpoint, status), n) in self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "rinfer_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}"
            );
        }
        let counter = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: f64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        counter(
            &mut out,
            "rinfer_prompt_tokens_total",
            "Prompt tokens of admitted requests.",
            &self.prompt_tokens,
        );
        counter(
            &mut out,
            "rinfer_generated_tokens_total",
            "Tokens generated.",
            &self.generated_tokens,
        );
        counter(
            &mut out,
            "rinfer_cancelled_total",
            "Generations cancelled because the client disconnected.",
            &self.cancelled,
        );
        self.time_to_first_token.render(
            &mut out,
            "rinfer_time_to_first_token_seconds",
            "Seconds from a request's arrival to its first generated token.",
        );
        self.inter_token_latency.render(
            &mut out,
            "rinfer_inter_token_latency_seconds",
            "Seconds between consecutive tokens of one sequence.",
        );
        let load = |v: &AtomicI64| v.load(Ordering::Relaxed).max(0) as f64;
        gauge(
            &mut out,
            "rinfer_queue_depth",
            "Requests waiting for a free sequence.",
            load(&self.queue_depth),
        );
        gauge(
            &mut out,
            "rinfer_running_sequences",
            "Sequences being prefilled or decoded.",
            load(&self.running),
        );
        gauge(
            &mut out,
            "rinfer_kv_cache_used_positions",
            "KV cache positions in use over all sequences.",
            load(&self.kv_used),
        );
        gauge(
            &mut out,
            "rinfer_kv_cache_capacity_positions",
            "KV cache positions allocated over all sequences.",
            load(&self.kv_capacity),
        );
        let capacity = load(&self.kv_capacity);
        gauge(
            &mut out,
            "rinfer_kv_cache_usage_ratio",
            "Fraction of the KV cache in use.",
            if capacity > 0.0 {
                load(&self.kv_used) / capacity
            } else {
                0.0
            },
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.inter_token_latency.observe(0.004);
        m.inter_token_latency.observe(0.2);
        m.inter_token_latency.observe(100.0);
        m.record_request("/v1/completions", 200);
        let text = m.render();
        assert!(text.contains("rinfer_inter_token_latency_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("rinfer_inter_token_latency_seconds_bucket{le=\"0.25\"} 2"));
        assert!(text.contains("rinfer_inter_token_latency_seconds_bucket{le=\"+Inf\"} 3"));
        assert!(
            text.contains("rinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 1")
        );
    }
}
