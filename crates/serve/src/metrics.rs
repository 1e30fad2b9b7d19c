//! Counters, gauges and histograms, rendered in the Prometheus text format at `/metrics`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use rinfer_model::PrefixCacheStats;

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
    /// The engine's prefix cache.
    pub prefix: PrefixMetrics,
    /// The engine's speculative decoding.
    pub speculation: crate::speculation_metrics::SpeculationMetrics,
}

/// The engine's prefix cache, as the engine thread last published it, and each tenant's share
/// of its reuse.
#[derive(Default)]
pub struct PrefixMetrics {
    requests: AtomicU64,
    hits: AtomicU64,
    prompt_tokens: AtomicU64,
    cached_tokens: AtomicU64,
    evictions: AtomicU64,
    bytes: AtomicU64,
    budget: AtomicU64,
    /// Per tenant (API key): requests, hits, prompt tokens, cached tokens.
    tenants: Mutex<HashMap<u64, [u64; 4]>>,
}

impl PrefixMetrics {
    /// Takes the engine's totals.
    pub fn publish(&self, stats: &PrefixCacheStats) {
        let set = |field: &AtomicU64, v: u64| field.store(v, Ordering::Relaxed);
        set(&self.requests, stats.requests);
        set(&self.hits, stats.hits);
        set(&self.prompt_tokens, stats.prompt_tokens);
        set(&self.cached_tokens, stats.cached_tokens);
        set(&self.evictions, stats.evictions);
        set(&self.bytes, stats.bytes as u64);
        set(&self.budget, stats.budget as u64);
    }

    /// Counts a finished request of `tenant` with `prompt` prompt tokens, `cached` of them
    /// reused.
    pub fn record(&self, tenant: u64, prompt: usize, cached: usize) {
        let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        let counts = tenants.entry(tenant).or_default();
        counts[0] += 1;
        counts[1] += u64::from(cached > 0);
        counts[2] += prompt as u64;
        counts[3] += cached as u64;
    }

    /// The reuse counters for `/metrics`: the engine's totals, or only `tenant`'s own.
    fn reuse(&self, tenant: Option<u64>) -> [u64; 4] {
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        match tenant {
            None => [
                load(&self.requests),
                load(&self.hits),
                load(&self.prompt_tokens),
                load(&self.cached_tokens),
            ],
            Some(tenant) => self
                .tenants
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&tenant)
                .copied()
                .unwrap_or_default(),
        }
    }

    fn render(&self, out: &mut String, tenant: Option<u64>) {
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        let [requests, hits, prompt, cached] = self.reuse(tenant);
        let counters = [
            (
                "rinfer_prefix_cache_cached_tokens_total",
                "Prompt tokens reused from the prefix cache instead of computed.",
                cached,
            ),
            (
                "rinfer_prefix_cache_hits_total",
                "Requests that reused at least one cached prompt token.",
                hits,
            ),
            (
                "rinfer_prefix_cache_evictions_total",
                "Cached blocks evicted to stay within the budget.",
                load(&self.evictions),
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        let ratio = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                part as f64 / whole as f64
            }
        };
        let gauges = [
            (
                "rinfer_prefix_cache_hit_rate",
                "Share of prompt tokens reused from the prefix cache.",
                ratio(cached, prompt),
            ),
            (
                "rinfer_prefix_cache_request_hit_rate",
                "Share of requests that reused at least one cached prompt token.",
                ratio(hits, requests),
            ),
            (
                "rinfer_prefix_cache_bytes",
                "Bytes the prefix cache's blocks hold.",
                load(&self.bytes) as f64,
            ),
            (
                "rinfer_prefix_cache_budget_bytes",
                "The most bytes the prefix cache's blocks may hold (--kv-cache-mib).",
                load(&self.budget) as f64,
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
    }
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
    #[cfg(test)]
    pub fn render(&self) -> String {
        self.render_for(None)
    }

    /// The Prometheus text exposition for a caller of `tenant` (`None`: the operator): a
    /// tenant sees the prefix cache's reuse counters of its own requests only.
    pub fn render_for(&self, tenant: Option<u64>) -> String {
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
        self.prefix.render(&mut out, tenant);
        self.speculation.render(&mut out);
        let aliases = crate::metric_aliases::vllm_aliases(&out);
        out.push_str(&aliases);
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

    #[test]
    fn the_prefix_cache_counters_and_hit_rate_come_from_the_engine_totals() {
        let m = Metrics::default();
        m.prefix.publish(&PrefixCacheStats {
            requests: 4,
            hits: 3,
            prompt_tokens: 400,
            cached_tokens: 300,
            evictions: 7,
            blocks: 2,
            bytes: 2048,
            budget: 4096,
        });
        let text = m.render();
        for line in [
            "rinfer_prefix_cache_cached_tokens_total 300",
            "rinfer_prefix_cache_hits_total 3",
            "rinfer_prefix_cache_evictions_total 7",
            "rinfer_prefix_cache_hit_rate 0.75",
            "rinfer_prefix_cache_request_hit_rate 0.75",
            "rinfer_prefix_cache_bytes 2048",
            "rinfer_prefix_cache_budget_bytes 4096",
        ] {
            assert!(text.contains(line), "{line} missing");
        }
    }

    #[test]
    fn a_tenant_sees_only_its_own_prefix_cache_reuse() {
        let m = Metrics::default();
        m.prefix.publish(&PrefixCacheStats {
            requests: 2,
            hits: 1,
            prompt_tokens: 200,
            cached_tokens: 95,
            ..PrefixCacheStats::default()
        });
        m.prefix.record(1, 100, 95);
        m.prefix.record(2, 100, 0);
        let theirs = m.render_for(Some(2));
        assert!(
            theirs.contains("rinfer_prefix_cache_cached_tokens_total 0"),
            "{theirs}"
        );
        assert!(theirs.contains("rinfer_prefix_cache_hits_total 0"));
        let mine = m.render_for(Some(1));
        assert!(mine.contains("rinfer_prefix_cache_cached_tokens_total 95"));
        let all = m.render_for(None);
        assert!(all.contains("rinfer_prefix_cache_cached_tokens_total 95"));
        assert!(all.contains("rinfer_prefix_cache_hits_total 1"));
    }
}
