//! Token and cost accounting, normalized across CLIs.

use serde::{Deserialize, Serialize};

/// Tokens and cost of one report or of a whole run. Every part is optional because no CLI reports
/// all of them: Grok reports no cost, only Copilot counts premium requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Input (prompt) tokens, cache reads and writes excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    /// Tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<u64>,
    /// Tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<u64>,
    /// Reasoning tokens, where reported separately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// Cost in US dollars as the CLI reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Premium requests consumed (Copilot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub premium_requests: Option<f64>,
}

impl Usage {
    /// Adds another report to this one. A part stays `None` only while both sides lack it, so a
    /// sum never claims a zero that nobody measured.
    pub fn add(&mut self, other: &Usage) {
        fn sum_u(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        fn sum_f(a: Option<f64>, b: Option<f64>) -> Option<f64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            }
        }
        self.input = sum_u(self.input, other.input);
        self.output = sum_u(self.output, other.output);
        self.cache_read = sum_u(self.cache_read, other.cache_read);
        self.cache_write = sum_u(self.cache_write, other.cache_write);
        self.reasoning = sum_u(self.reasoning, other.reasoning);
        self.cost_usd = sum_f(self.cost_usd, other.cost_usd);
        self.premium_requests = sum_f(self.premium_requests, other.premium_requests);
    }

    /// True when nothing was reported.
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_keeps_unreported_parts_unreported() {
        let mut total = Usage {
            input: Some(10),
            ..Usage::default()
        };
        total.add(&Usage {
            input: Some(5),
            cost_usd: Some(0.25),
            ..Usage::default()
        });
        assert_eq!(
            total,
            Usage {
                input: Some(15),
                cost_usd: Some(0.25),
                ..Usage::default()
            }
        );
        assert_eq!(total.output, None);
    }
}
