//! Pie and donut charts.

use serde_json::Value;
use std::f64::consts::PI;

use super::*;

/// Draws the pie series `s`; returns the chart's description.
pub(super) fn pie(f: &mut Frame, opt: &Value, s: &Value) -> String {
    let rows: Vec<Value> = match s.get("data") {
        Some(Value::Array(a)) => a.iter().take(MAX_SLICES).cloned().collect(),
        _ => dataset(opt)
            .unwrap_or_default()
            .into_iter()
            .take(MAX_SLICES)
            .map(Value::Array)
            .collect(),
    };
    let slices: Vec<(String, f64, String)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, item)| {
            let (name, value) = match item {
                Value::Object(o) => (
                    o.get("name").and_then(str_of),
                    o.get("value").and_then(num_of),
                ),
                Value::Array(a) => (a.first().and_then(str_of), a.get(1).and_then(num_of)),
                other => (None, num_of(other)),
            };
            let color = item
                .get("itemStyle")
                .and_then(|st| st.get("color"))
                .and_then(safe_color)
                .unwrap_or_else(|| f.color(i));
            value.filter(|v| *v > 0.0).map(|v| {
                (
                    name.unwrap_or_else(|| format!("Item {}", i.saturating_add(1))),
                    v,
                    color,
                )
            })
        })
        .collect();
    let items: Vec<(String, String)> = slices
        .iter()
        .map(|(nm, _, c)| (nm.clone(), c.clone()))
        .collect();
    f.legend(&items);
    let total: f64 = slices.iter().map(|(_, v, _)| v).sum();
    let avail = (f.h - f.top - 10.0).max(40.0);
    let (cx, cy) = (f.w / 2.0, f.top + avail / 2.0);
    let base = f.w.min(avail) / 2.0;
    let frac = |v: Option<&Value>, default: f64| {
        match v {
            Some(Value::String(t)) => t
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<f64>().ok())
                .map(|p| p / 100.0 * base),
            Some(other) => num_of(other),
            None => None,
        }
        .unwrap_or(default * base)
    };
    let (inner, outer) = match s.get("radius") {
        Some(Value::Array(r)) => (frac(r.first(), 0.0), frac(r.get(1), 0.75)),
        other => (0.0, frac(other, 0.75)),
    };
    let outer = outer.clamp(10.0, (base - 22.0).max(10.0));
    let inner = inner.clamp(0.0, outer * 0.95);
    let at = |r: f64, a: f64| format!("{},{}", n(cx + r * a.cos()), n(cy + r * a.sin()));
    let mut angle = -PI / 2.0;
    for (_, v, color) in &slices {
        let sweep = v / total * 2.0 * PI;
        let d = if sweep >= 2.0 * PI - 1e-6 {
            let ring = |r: f64| {
                format!(
                    "M{} A{r},{r} 0 1 1 {} A{r},{r} 0 1 1 {} Z",
                    at(r, 0.0),
                    at(r, PI),
                    at(r, 0.0),
                    r = n(r)
                )
            };
            if inner > 0.0 {
                format!("{} {}", ring(outer), ring(inner))
            } else {
                ring(outer)
            }
        } else {
            let (a0, a1) = (angle, angle + sweep);
            let large = u8::from(sweep > PI);
            let inner_part = if inner > 0.0 {
                format!(
                    "L{} A{r},{r} 0 {large} 0 {}",
                    at(inner, a1),
                    at(inner, a0),
                    r = n(inner)
                )
            } else {
                format!("L{},{}", n(cx), n(cy))
            };
            format!(
                "M{} A{r},{r} 0 {large} 1 {} {inner_part} Z",
                at(outer, a0),
                at(outer, a1),
                r = n(outer)
            )
        };
        f.body.push_str(&format!(r##"<path class="slice" d="{d}" fill="{color}" fill-rule="evenodd" stroke="#fff" stroke-width="1"/>"##));
        if sweep / (2.0 * PI) >= 0.03 {
            let mid = angle + sweep / 2.0;
            let anchor = if mid.cos() >= 0.0 { "start" } else { "end" };
            let (lx, ly) = (
                cx + (outer + 8.0) * mid.cos(),
                cy + (outer + 8.0) * mid.sin() + 4.0,
            );
            f.text(
                lx,
                ly,
                anchor,
                12.0,
                AXIS,
                &format!("{:.0}%", v / total * 100.0),
            );
        }
        angle += sweep;
    }
    let names: Vec<String> = slices
        .iter()
        .take(10)
        .map(|(nm, _, _)| truncate(nm, 40))
        .collect();
    let more = if slices.len() > 10 { ", …" } else { "" };
    format!("Pie chart: {}{more}", names.join(", "))
}
