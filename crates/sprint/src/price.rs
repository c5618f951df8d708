//! What a spawn cost when its CLI reports only tokens (Codex, OpenCode, Gemini CLI, Grok CLI
//! with some backends): an estimate from a price table, US dollars per million tokens per model,
//! so that the spend caps count it. The table starts with the public list prices of the models
//! the pinned CLIs default to ([`PriceTable::builtin`]) and the user extends or overrides it
//! with the settings' `[prices."<model>"]`. A model is found by its name, or else by the
//! longest name in the table its name starts with (`gpt-5-2025-08-07` is priced as `gpt-5`).
//! A cost the CLI reported is never replaced; an estimated one is marked so in the record
//! (`costEstimated` in `sprint.json`).

use std::collections::BTreeMap;

use corral_ports::Usage;

/// One model's price, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrice {
    /// Input tokens (not cached).
    pub input: f64,
    /// Output tokens (reasoning included, as the providers bill it).
    pub output: f64,
    /// Input tokens read from the cache; `None`: priced as input.
    pub cache_read: Option<f64>,
    /// Input tokens written to the cache; `None`: priced as input.
    pub cache_write: Option<f64>,
}

/// Prices per model, by the model's name as its provider spells it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    models: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    /// The public list prices (USD per million tokens, as published in 2026) of the models the
    /// pinned CLIs use by default; a starting point the settings extend or override.
    pub fn builtin() -> PriceTable {
        let price = |input: f64, output: f64, cache_read: f64| ModelPrice {
            input,
            output,
            cache_read: Some(cache_read),
            cache_write: None,
        };
        let models = [
            ("gpt-5", price(1.25, 10.0, 0.125)),
            ("gpt-5-codex", price(1.25, 10.0, 0.125)),
            ("gpt-5-mini", price(0.25, 2.0, 0.025)),
            ("claude-sonnet-4-5", price(3.0, 15.0, 0.3)),
            ("claude-opus-4-1", price(15.0, 75.0, 1.5)),
            ("claude-haiku-4-5", price(1.0, 5.0, 0.1)),
            ("gemini-2.5-pro", price(1.25, 10.0, 0.31)),
            ("gemini-2.5-flash", price(0.3, 2.5, 0.075)),
            ("grok-4", price(3.0, 15.0, 0.75)),
            ("grok-code-fast-1", price(0.2, 1.5, 0.02)),
        ];
        PriceTable {
            models: models
                .into_iter()
                .map(|(name, price)| (name.to_string(), price))
                .collect(),
        }
    }

    /// This table with `prices` added, each replacing the one of the same model.
    pub fn with(mut self, prices: impl IntoIterator<Item = (String, ModelPrice)>) -> PriceTable {
        self.models.extend(prices);
        self
    }

    /// The price of `model`: its own, else the longest name in the table it starts with.
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        if let Some(price) = self.models.get(model) {
            return Some(*price);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.starts_with(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| *price)
    }

    /// The estimated cost of `usage` on `model`, in US dollars: `None` when the usage has a
    /// cost of its own, names no tokens, or the model has no price.
    pub fn estimate(&self, model: Option<&str>, usage: &Usage) -> Option<f64> {
        if usage.cost_usd.is_some() || (usage.input.is_none() && usage.output.is_none()) {
            return None;
        }
        let price = self.price(model?)?;
        #[allow(clippy::cast_precision_loss)]
        let tokens = |n: Option<u64>| n.unwrap_or(0) as f64 / 1_000_000.0;
        Some(
            tokens(usage.input) * price.input
                + tokens(usage.output) * price.output
                + tokens(usage.cache_read) * price.cache_read.unwrap_or(price.input)
                + tokens(usage.cache_write) * price.cache_write.unwrap_or(price.input),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cost_is_estimated_only_when_the_cli_reported_none_and_the_model_has_a_price() {
        let table = PriceTable::builtin();
        let tokens = Usage {
            input: Some(1_000_000),
            output: Some(100_000),
            cache_read: Some(2_000_000),
            ..Usage::default()
        };
        let cost = table.estimate(Some("gpt-5-2025-08-07"), &tokens).unwrap();
        assert!((cost - (1.25 + 1.0 + 0.25)).abs() < 1e-9, "{cost}");
        // The longest name that fits: gpt-5-mini, not gpt-5.
        let mini = table.estimate(Some("gpt-5-mini"), &tokens).unwrap();
        assert!((mini - (0.25 + 0.2 + 0.05)).abs() < 1e-9, "{mini}");
        let reported = Usage {
            cost_usd: Some(0.5),
            ..tokens
        };
        assert_eq!(table.estimate(Some("gpt-5"), &reported), None);
        assert_eq!(table.estimate(Some("unknown-model"), &tokens), None);
        assert_eq!(table.estimate(None, &tokens), None);
        // The user's price replaces the built-in one.
        let mine = table.with([(
            "gpt-5".to_string(),
            ModelPrice {
                input: 2.0,
                output: 0.0,
                cache_read: None,
                cache_write: None,
            },
        )]);
        let cost = mine.estimate(Some("gpt-5"), &tokens).unwrap();
        assert!((cost - (2.0 + 4.0)).abs() < 1e-9, "{cost}");
    }
}
