//! Token and cost accounting, normalized across CLIs.

use serde::{Deserialize, Serialize};

/// Tokens and cost of one report or of a whole run. Every part is optional because no CLI reports
/// all of them: Grok reports no cost, only Copilot counts premium requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input (prompt) tokens, cache reads and writes excluded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<u64>,
    /// Output (completion) tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<u64>,
    /// Tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "cache_read")]
    pub cache_read: Option<u64>,
    /// Tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "cache_write")]
    pub cache_write: Option<u64>,
    /// Reasoning tokens, where reported separately.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
    /// Cost in US dollars as the CLI reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "cost_usd")]
    pub cost_usd: Option<f64>,
    /// Premium requests consumed (Copilot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "premium_requests")]
    pub premium_requests: Option<f64>,
}

/// The largest cost in US dollars one report may claim; anything above is taken for garbage
/// (a CLI bug, a hostile stream), not money spent.
pub const MAX_PLAUSIBLE_COST_USD: f64 = 100_000.0;

/// The largest number of premium requests one report may claim.
const MAX_PLAUSIBLE_PREMIUM_REQUESTS: f64 = 1_000_000.0;

/// `value` when it is a finite amount between 0 and `max`, else `None`: a negative, infinite or
/// NaN cost (which JSON cannot even store: it became `null`) must not reach a sum or a display.
fn plausible(value: Option<f64>, max: f64) -> Option<f64> {
    value.filter(|v| v.is_finite() && (0.0..=max).contains(v))
}

impl Usage {
    /// This report with implausible amounts dropped (see [`MAX_PLAUSIBLE_COST_USD`]): what the
    /// engine keeps of a CLI's own figures.
    #[must_use]
    pub fn sanitized(self) -> Usage {
        Usage {
            cost_usd: plausible(self.cost_usd, MAX_PLAUSIBLE_COST_USD),
            premium_requests: plausible(self.premium_requests, MAX_PLAUSIBLE_PREMIUM_REQUESTS),
            ..self
        }
    }

    /// Adds another report to this one. A part stays `None` only while both sides lack it, so a
    /// sum never claims a zero that nobody measured. Implausible amounts in `other` (negative,
    /// not finite, absurdly large) count as not reported.
    pub fn add(&mut self, other: &Usage) {
        let other = &other.sanitized();
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

    #[test]
    fn implausible_costs_are_not_summed() {
        let mut total = Usage {
            cost_usd: Some(0.5),
            ..Usage::default()
        };
        for bad in [-1234.5, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1e300] {
            total.add(&Usage {
                cost_usd: Some(bad),
                premium_requests: Some(bad),
                ..Usage::default()
            });
        }
        assert_eq!(
            total,
            Usage {
                cost_usd: Some(0.5),
                ..Usage::default()
            }
        );
        let lone = Usage {
            cost_usd: Some(f64::INFINITY),
            input: Some(3),
            ..Usage::default()
        };
        assert_eq!(
            lone.sanitized(),
            Usage {
                input: Some(3),
                ..Usage::default()
            }
        );
    }
}
