//! `/metrics` under the names dashboards built for vLLM already chart (`vllm:` prefix), for
//! the metrics whose meaning is the same: each alias repeats its rinfer metric's samples
//! (histograms with rinfer's buckets). Metrics without an equal in vLLM have no alias.

/// `(rinfer name, vLLM name)`.
const ALIASES: [(&str, &str); 8] = [
    ("rinfer_prompt_tokens_total", "vllm:prompt_tokens_total"),
    (
        "rinfer_generated_tokens_total",
        "vllm:generation_tokens_total",
    ),
    ("rinfer_running_sequences", "vllm:num_requests_running"),
    ("rinfer_queue_depth", "vllm:num_requests_waiting"),
    ("rinfer_kv_cache_usage_ratio", "vllm:kv_cache_usage_perc"),
    (
        "rinfer_time_to_first_token_seconds",
        "vllm:time_to_first_token_seconds",
    ),
    (
        "rinfer_inter_token_latency_seconds",
        "vllm:inter_token_latency_seconds",
    ),
    (
        "rinfer_prefix_cache_cached_tokens_total",
        "vllm:prefix_cache_hits_total",
    ),
];

/// The alias lines of the exposition `text` (to append to it).
pub fn vllm_aliases(text: &str) -> String {
    let mut out = String::new();
    for (name, alias) in ALIASES {
        for line in text.lines() {
            let renamed = if let Some(rest) = line.strip_prefix("# HELP ") {
                rest.strip_prefix(name)
                    .filter(|r| r.starts_with(' '))
                    .map(|r| format!("# HELP {alias}{r}"))
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                rest.strip_prefix(name)
                    .filter(|r| r.starts_with(' '))
                    .map(|r| format!("# TYPE {alias}{r}"))
            } else {
                line.strip_prefix(name)
                    .filter(|r| {
                        [" ", "{", "_bucket{", "_sum ", "_count "]
                            .iter()
                            .any(|s| r.starts_with(s))
                    })
                    .map(|r| format!("{alias}{r}"))
            };
            if let Some(renamed) = renamed {
                out.push_str(&renamed);
                out.push('\n');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::metrics::Metrics;
    use std::sync::atomic::Ordering;

    #[test]
    fn vllm_names_repeat_the_samples_of_the_same_metrics() {
        let m = Metrics::default();
        m.prompt_tokens.store(12, Ordering::Relaxed);
        m.generated_tokens.store(34, Ordering::Relaxed);
        m.queue_depth.store(2, Ordering::Relaxed);
        m.time_to_first_token.observe(0.02);
        let text = m.render();
        for line in [
            "# TYPE vllm:prompt_tokens_total counter",
            "vllm:prompt_tokens_total 12",
            "vllm:generation_tokens_total 34",
            "vllm:num_requests_waiting 2",
            "# TYPE vllm:time_to_first_token_seconds histogram",
            "vllm:time_to_first_token_seconds_bucket{le=\"0.025\"} 1",
            "vllm:time_to_first_token_seconds_count 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        // `rinfer_prompt_tokens_total` is not mistaken for a longer name's prefix.
        assert_eq!(text.matches("vllm:prompt_tokens_total 12").count(), 1);
    }
}
