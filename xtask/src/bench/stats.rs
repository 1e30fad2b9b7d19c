//! Summaries of repeated measurements: the median with the range around it.

use serde_json::{Value, json};

/// The median, minimum and maximum of some measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The middle value (the mean of the two middle values for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
}

impl Summary {
    /// Summarises `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Self> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => sorted[n / 2],
            _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Some(Self {
            median,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }

    /// `median (min–max)` with `decimals` digits after the point.
    pub fn show(&self, decimals: usize) -> String {
        format!(
            "{:.d$} ({:.d$}–{:.d$})",
            self.median,
            self.min,
            self.max,
            d = decimals
        )
    }

    /// `{"median", "min", "max"}`.
    pub fn to_json(self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts_and_the_range() {
        let odd = Summary::of(&[5.0, 1.0, 3.0]).unwrap();
        assert_eq!((odd.median, odd.min, odd.max), (3.0, 1.0, 5.0));
        let even = Summary::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((even.median, even.min, even.max), (3.0, 1.0, 10.0));
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(odd.show(1), "3.0 (1.0–5.0)");
    }
}
