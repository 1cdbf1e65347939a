//! Bar series: vertical or horizontal, side by side in groups, stacked within a group.

use super::grid::Grid;
use super::series::{Plotted, Series};
use super::*;

/// The thickness of one bar: the groups share 80 % of a category's band with gaps of 30 % of a
/// bar between them; without categories, the plot's width is shared by all the points.
pub(super) fn width(grid: &Grid, plotted: &Plotted) -> f64 {
    let n_groups = plotted.groups.max(1) as f64;
    if grid.by_category {
        grid.band * 0.8 / (n_groups + (n_groups - 1.0) * 0.3)
    } else {
        (grid.plot_width() / (plotted.points().count().max(1) as f64 + 1.0) * 0.6).clamp(1.0, 40.0)
    }
}

/// Draws the bars of `s`, each `bar_w` thick, in its group's place within the category.
pub(super) fn draw(f: &mut Frame, grid: &Grid, s: &Series, bar_w: f64) {
    let off = if grid.by_category {
        -grid.band * 0.4 + bar_w * (s.group as f64 * 1.3 + 0.5)
    } else {
        0.0
    };
    let zero = grid.zero();
    for &(p, lo, hi) in s.pts.iter().flatten() {
        let c = grid.along(p) + if grid.horizontal { -off } else { off };
        let (a, b) = (
            grid.across(grid.clamp(if s.stacked { lo } else { zero })),
            grid.across(grid.clamp(hi)),
        );
        let (x, y, rw, rh) = if grid.horizontal {
            (a.min(b), c - bar_w / 2.0, (a - b).abs(), bar_w)
        } else {
            (c - bar_w / 2.0, a.min(b), bar_w, (a - b).abs())
        };
        f.body.push_str(&format!(
            r#"<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}"/>"#,
            n(x),
            n(y),
            n(rw),
            n(rh),
            s.color
        ));
    }
}
