//! Line series: a polyline through each run of values (a missing value breaks the line), the
//! area under it when `areaStyle` asks (down to zero, or to the stack below), and markers.

use super::grid::Grid;
use super::series::{Point, Series};
use super::*;

/// Most points of a line that get markers; a longer line is drawn without them.
const MAX_MARKED: usize = 200;

/// Draws the line `s`.
pub(super) fn draw(f: &mut Frame, grid: &Grid, s: &Series) {
    let segments = s.pts.split(Option::is_none).filter(|seg| !seg.is_empty());
    for seg in segments {
        let pts: Vec<Point> = seg.iter().flatten().copied().collect();
        if let Some(opacity) = s.area {
            area(f, grid, s, &pts, opacity);
        }
        let line = path(&mut pts.iter().map(|&(p, _, hi)| grid.point(p, grid.clamp(hi))));
        f.body.push_str(&format!(
            r#"<polyline class="line" points="{line}" fill="none" stroke="{}" stroke-width="2"/>"#,
            s.color
        ));
    }
    if s.symbols && s.pts.len() <= MAX_MARKED {
        for &(p, _, hi) in s.pts.iter().flatten() {
            let (x, y) = grid.point(p, grid.clamp(hi));
            f.body.push_str(&format!(
                r##"<circle class="point" cx="{}" cy="{}" r="3" fill="#fff" stroke="{}" stroke-width="2"/>"##,
                n(x),
                n(y),
                s.color
            ));
        }
    }
}

/// Fills the area between the run `pts` of `s` and its base.
fn area(f: &mut Frame, grid: &Grid, s: &Series, pts: &[Point], opacity: f64) {
    let zero = grid.zero();
    let base = |lo: f64| if s.stacked { lo } else { zero };
    let upper = pts.iter().map(|&(p, _, hi)| grid.point(p, grid.clamp(hi)));
    let lower = pts
        .iter()
        .rev()
        .map(|&(p, lo, _)| grid.point(p, grid.clamp(base(lo))));
    f.body.push_str(&format!(
        r#"<polygon class="area" points="{}" fill="{}" fill-opacity="{}"/>"#,
        path(&mut upper.chain(lower)),
        s.color,
        n(opacity)
    ));
}

/// SVG `points`: `x,y` pairs separated by spaces.
fn path(it: &mut dyn Iterator<Item = (f64, f64)>) -> String {
    it.map(|(x, y)| format!("{},{}", n(x), n(y)))
        .collect::<Vec<_>>()
        .join(" ")
}
