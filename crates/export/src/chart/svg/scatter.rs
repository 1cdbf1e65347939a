//! Scatter series: a dot at each point.

use super::grid::Grid;
use super::series::Series;
use super::*;

/// Draws the dots of `s`.
pub(super) fn draw(f: &mut Frame, grid: &Grid, s: &Series) {
    for &(p, _, hi) in s.pts.iter().flatten() {
        let (x, y) = grid.point(p, grid.clamp(hi));
        f.body.push_str(&format!(
            r#"<circle class="dot" cx="{}" cy="{}" r="{}" fill="{}" fill-opacity="0.8"/>"#,
            n(x),
            n(y),
            n(s.radius),
            s.color
        ));
    }
}
