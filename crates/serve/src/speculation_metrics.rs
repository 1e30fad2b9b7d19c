//! Speculative decoding's counters at `/metrics`: tokens guessed ahead, tokens the model
//! confirmed, and the share confirmed.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use rinfer_model::SpeculationStats;

/// The engine's speculation totals, as the engine thread last published them.
#[derive(Default)]
pub struct SpeculationMetrics {
    drafts: AtomicU64,
    drafted_tokens: AtomicU64,
    accepted_tokens: AtomicU64,
}

impl SpeculationMetrics {
    /// Takes the engine's totals.
    pub fn publish(&self, stats: &SpeculationStats) {
        let set = |field: &AtomicU64, v: u64| field.store(v, Ordering::Relaxed);
        set(&self.drafts, stats.drafts);
        set(&self.drafted_tokens, stats.drafted_tokens);
        set(&self.accepted_tokens, stats.accepted_tokens);
    }

    /// Appends the counters and the acceptance rate in the Prometheus text format.
    pub fn render(&self, out: &mut String) {
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        let stats = SpeculationStats {
            drafts: load(&self.drafts),
            drafted_tokens: load(&self.drafted_tokens),
            accepted_tokens: load(&self.accepted_tokens),
        };
        let counters = [
            (
                "rinfer_speculation_drafts_total",
                "Decoding steps in which a sequence fed tokens guessed ahead.",
                stats.drafts,
            ),
            (
                "rinfer_speculation_drafted_tokens_total",
                "Tokens guessed ahead by speculative decoding.",
                stats.drafted_tokens,
            ),
            (
                "rinfer_speculation_accepted_tokens_total",
                "Guessed tokens the model confirmed.",
                stats.accepted_tokens,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}"
            );
        }
        let name = "rinfer_speculation_acceptance_rate";
        let _ = writeln!(
            out,
            "# HELP {name} Share of guessed tokens the model confirmed.\n# TYPE {name} gauge\n{name} {}",
            stats.acceptance_rate()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speculation_counters_and_acceptance_rate_come_from_the_engine_totals() {
        let m = SpeculationMetrics::default();
        m.publish(&SpeculationStats {
            drafts: 5,
            drafted_tokens: 40,
            accepted_tokens: 30,
        });
        let mut text = String::new();
        m.render(&mut text);
        for line in [
            "rinfer_speculation_drafts_total 5",
            "rinfer_speculation_drafted_tokens_total 40",
            "rinfer_speculation_accepted_tokens_total 30",
            "rinfer_speculation_acceptance_rate 0.75",
        ] {
            assert!(text.contains(line), "{line} missing");
        }
    }
}
