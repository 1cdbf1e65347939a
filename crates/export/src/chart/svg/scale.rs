//! Value axes: a domain and round ticks.

use super::*;

/// A value axis: its domain and round ticks.
pub(super) struct Scale {
    /// Low end of the domain.
    pub(super) lo: f64,
    /// High end of the domain.
    pub(super) hi: f64,
    /// Tick values, low to high.
    pub(super) ticks: Vec<f64>,
    /// Decimals shown in tick labels.
    pub(super) decimals: usize,
}

impl Scale {
    /// A scale over `values` (and zero, if `with_zero`), honouring the axis' numeric `min`/`max`.
    pub(super) fn new(
        values: impl Iterator<Item = f64>,
        axis: Option<&Value>,
        with_zero: bool,
    ) -> Self {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if with_zero || lo > hi {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        let fixed = |k: &str| {
            axis.and_then(|a| a.get(k))
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
        };
        let (min, max) = (fixed("min"), fixed("max"));
        lo = min.unwrap_or(lo);
        hi = max.unwrap_or(hi);
        if hi <= lo {
            hi = lo + if lo == 0.0 { 1.0 } else { lo.abs() };
        }
        let raw = (hi - lo) / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let norm = raw / mag;
        let step = mag
            * if norm < 1.5 {
                1.0
            } else if norm < 3.0 {
                2.0
            } else if norm < 7.0 {
                5.0
            } else {
                10.0
            };
        lo = min.unwrap_or((lo / step).floor() * step);
        hi = max.unwrap_or((hi / step).ceil() * step);
        let first = (lo / step).ceil();
        let ticks: Vec<f64> = (0..=50)
            .map(|k| (first + k as f64) * step)
            .take_while(|t| *t <= hi + step * 1e-9)
            .collect();
        let decimals = if step >= 1.0 {
            0
        } else {
            (-step.log10().floor()).clamp(0.0, 8.0) as usize
        };
        Scale {
            lo,
            hi,
            ticks,
            decimals,
        }
    }

    /// Where `v` lies in the domain, 0 at the low end and 1 at the high end.
    pub(super) fn frac(&self, v: f64) -> f64 {
        let f = (v - self.lo) / (self.hi - self.lo);
        if f.is_finite() { f } else { 0.0 }
    }

    /// `v` kept inside the domain.
    pub(super) fn clamp(&self, v: f64) -> f64 {
        v.clamp(self.lo, self.hi)
    }

    /// The tick label of `v`, with thousands separators and the axis' `{value}` formatter.
    pub(super) fn label(&self, v: f64, axis: Option<&Value>) -> String {
        let text = group_thousands(&format!(
            "{:.*}",
            self.decimals,
            if v.abs() < 1e-12 { 0.0 } else { v }
        ));
        match axis
            .and_then(|a| a.get("axisLabel"))
            .and_then(|l| l.get("formatter"))
            .and_then(Value::as_str)
        {
            Some(fmt) if fmt.contains("{value}") => truncate(&fmt.replace("{value}", &text), 24),
            _ => text,
        }
    }
}
