//! What model calls cost: prices per model (US dollars per million tokens, as providers list
//! them) from the configuration, applied to the token figures each call recorded in the log.
//! A call whose model has no price is counted apart, never priced at zero.

use std::collections::BTreeMap;

use ba_protocol::Usage;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The price of one model, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// Input tokens not read from or written to the cache.
    pub input: f64,
    /// Output tokens (thinking included).
    pub output: f64,
    /// Input tokens read from the prompt cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<f64>,
    /// Input tokens written to the prompt cache (default: the input price).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
}

impl ModelPrice {
    /// What `usage` cost at this price, in US dollars.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(usage.input_tokens, self.input)
            + per(usage.output_tokens, self.output)
            + per(
                usage.cache_read_tokens,
                self.cache_read.unwrap_or(self.input),
            )
            + per(
                usage.cache_write_tokens,
                self.cache_write.unwrap_or(self.input),
            )
    }

    /// Whether every figure is a finite price of zero or more.
    fn is_valid(&self) -> bool {
        [
            Some(self.input),
            Some(self.output),
            self.cache_read,
            self.cache_write,
        ]
        .into_iter()
        .flatten()
        .all(|p| p.is_finite() && p >= 0.0)
    }
}

/// Prices by model name. A call's model is priced by the exact name, else by the longest
/// name that starts it (`claude-sonnet-4-5` prices `claude-sonnet-4-5-20250929`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Prices(BTreeMap<String, ModelPrice>);

/// A price that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the price of model {model:?} must be finite and not negative")]
pub struct PriceError {
    /// The model whose price is wrong.
    pub model: String,
}

impl Prices {
    /// Prices from a map of model names, each checked (finite, not negative).
    ///
    /// # Errors
    /// [`PriceError`] naming the first model whose price is wrong.
    pub fn new(prices: BTreeMap<String, ModelPrice>) -> Result<Self, PriceError> {
        if let Some((model, _)) = prices.iter().find(|(_, p)| !p.is_valid()) {
            return Err(PriceError {
                model: model.clone(),
            });
        }
        Ok(Self(prices))
    }

    /// Whether no model has a price.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The price of `model`, if one is configured.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        self.0.get(model).or_else(|| {
            self.0
                .iter()
                .filter(|(name, _)| !name.is_empty() && model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, p)| p)
        })
    }

    /// What the model call that wrote `entry` cost, by the model that answered it; `None`
    /// for an entry without usage or a model without a price.
    pub fn of_entry(&self, entry: &ba_protocol::LogEntry) -> Option<f64> {
        let usage = entry.records.usage?;
        let model = entry.records.model.as_ref().and_then(|m| m.name.as_deref());
        self.cost(model, &usage)
    }

    /// What one call of `model` with `usage` cost, or `None` when `model` has no price.
    pub fn cost(&self, model: Option<&str>, usage: &Usage) -> Option<f64> {
        model.and_then(|m| self.get(m)).map(|p| p.cost(usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prices() -> Prices {
        let mut m = BTreeMap::new();
        m.insert(
            "claude-sonnet-4".to_owned(),
            ModelPrice {
                input: 3.0,
                output: 15.0,
                cache_read: Some(0.3),
                cache_write: Some(3.75),
            },
        );
        m.insert(
            "claude-sonnet-4-5".to_owned(),
            ModelPrice {
                input: 4.0,
                output: 20.0,
                ..ModelPrice::default()
            },
        );
        Prices::new(m).unwrap_or_default()
    }

    #[test]
    fn the_longest_matching_name_prices_a_call() {
        let p = prices();
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 2_000_000,
            cache_write_tokens: 0,
            estimated: false,
        };
        // 3 + 1.5 + 0.6
        assert_eq!(p.cost(Some("claude-sonnet-4-20250514"), &usage), Some(5.1));
        // 4 + 2 + 8 (cache reads at the input price when none is given)
        assert_eq!(
            p.cost(Some("claude-sonnet-4-5-20250929"), &usage),
            Some(14.0)
        );
        assert_eq!(p.cost(Some("gpt-4o"), &usage), None);
        assert_eq!(p.cost(None, &usage), None);
    }

    #[test]
    fn a_negative_or_infinite_price_is_refused_by_name() {
        let mut m = BTreeMap::new();
        m.insert(
            "m".to_owned(),
            ModelPrice {
                input: -1.0,
                ..ModelPrice::default()
            },
        );
        assert_eq!(
            Prices::new(m).err().map(|e| e.to_string()).as_deref(),
            Some("the price of model \"m\" must be finite and not negative")
        );
    }
}
