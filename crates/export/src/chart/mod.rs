//! Static SVG pictures of the ECharts charts in an HTML report, so that an exported report
//! shows its charts without running any script.
//!
//! The report's inline scripts are scanned (not run) for `echarts.init(...)` calls and the
//! `setOption(...)` calls of the chart variables they return; the option literals are read
//! by [`jslit`] and drawn by [`svg`]. All input is treated as hostile: sizes, counts and
//! nesting are capped and every text put into a picture is XML-escaped.

mod jslit;
mod svg;

use jslit::Vars;
use serde_json::Value;
use std::collections::HashMap;

/// Scripts longer than this many bytes are ignored.
const MAX_SCRIPT_BYTES: usize = 1 << 20;
/// At most this many charts are returned for one report.
const MAX_CHARTS: usize = 16;
/// Value nodes that may be built while reading one report's scripts.
const VALUE_BUDGET: usize = 2_000_000;
/// Bytes that expression reading may pass over in one report (failed reads are rescanned,
/// so this keeps hostile nesting of declarations from taking quadratic time).
const READ_BUDGET: usize = 32 * MAX_SCRIPT_BYTES;
/// Width of every picture, in SVG units.
const WIDTH: f64 = 720.0;
/// Height of a picture whose element gives none in its inline style.
const DEFAULT_HEIGHT: f64 = 360.0;

/// A chart found in a report: the id of the element it is drawn in and its picture.
pub(crate) struct StaticChart {
    /// The `id` of the element the chart is drawn in (empty when it could not be told).
    pub(crate) element_id: String,
    /// The picture: a standalone SVG document with no script and no external reference.
    pub(crate) svg: String,
    /// The chart's title text, if its option has one.
    pub(crate) title: Option<String>,
}

/// Every ECharts chart of `html`'s inline scripts, drawn as SVG; charts whose option cannot be
/// read or whose kind is not drawn come back with an SVG that says so in words (and names the
/// chart kind), never an error.
pub(crate) fn static_charts(html: &str) -> Vec<StaticChart> {
    let mut scan = Scan {
        vars: Vars::new(),
        elements: HashMap::new(),
        chart_vars: HashMap::new(),
        charts: Vec::new(),
        budget: VALUE_BUDGET,
        read_budget: READ_BUDGET,
    };
    for script in scripts(html) {
        if script.len() <= MAX_SCRIPT_BYTES {
            scan.script(script);
        }
    }
    scan.charts
        .into_iter()
        .map(|found| {
            let height = element_height(html, &found.element_id).unwrap_or(DEFAULT_HEIGHT);
            let (svg, title) = match &found.option {
                Some(option) => svg::render_option(option, WIDTH, height),
                None => (
                    svg::render_message("its options could not be read", None, WIDTH, height),
                    None,
                ),
            };
            StaticChart {
                element_id: found.element_id,
                svg,
                title,
            }
        })
        .collect()
}

/// The bodies of the report's inline scripts (those without `src` and of a script type).
fn scripts(html: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(start) = find_ci(html, "<script", pos) {
        let Some(tag_end) = html.get(start..).and_then(|t| t.find('>')) else {
            break;
        };
        let tag_end = start.saturating_add(tag_end);
        let body = tag_end.saturating_add(1);
        let end = find_ci(html, "</script", body).unwrap_or(html.len());
        let tag = html.get(start..tag_end).unwrap_or("").to_ascii_lowercase();
        let typed = tag.contains("type=");
        let runnable = !tag.contains("src=")
            && (!typed
                || ["javascript", "module", "ecmascript"]
                    .iter()
                    .any(|t| tag.contains(t)));
        if let Some(text) = html.get(body..end).filter(|_| runnable) {
            out.push(text);
        }
        pos = end.max(body);
    }
    out
}

/// Offset of the first ASCII-case-insensitive match of `needle` at or after `from`.
fn find_ci(hay: &str, needle: &str, from: usize) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let last = h.len().checked_sub(n.len())?;
    (from..=last).find(|&k| {
        h.get(k..k.saturating_add(n.len()))
            .is_some_and(|w| w.eq_ignore_ascii_case(n))
    })
}

/// The `height: NNNpx` of the inline style of the element whose id is `id`, kept to 120–2000.
fn element_height(html: &str, id: &str) -> Option<f64> {
    if id.is_empty() {
        return None;
    }
    for quote in ['"', '\''] {
        let pat = format!("id={quote}{id}{quote}");
        let mut from = 0;
        while let Some(k) = html.get(from..).and_then(|r| r.find(&pat)) {
            let at = from.saturating_add(k);
            from = at.saturating_add(pat.len());
            let before = html.get(..at).unwrap_or("");
            if !before.ends_with(|c: char| c.is_ascii_whitespace()) {
                continue;
            }
            let tag_start = before.rfind('<').unwrap_or(0);
            let tag_end = html
                .get(at..)
                .and_then(|r| r.find('>'))
                .map(|e| at.saturating_add(e));
            let tag = html
                .get(tag_start..tag_end.unwrap_or(html.len()))
                .unwrap_or("");
            return style_height(tag).map(|h| h.clamp(120.0, 2000.0));
        }
    }
    None
}

/// The pixel `height` declared in the `style` attribute of the start tag `tag`.
fn style_height(tag: &str) -> Option<f64> {
    let s = find_ci(tag, "style=", 0)?.saturating_add(6);
    let rest = tag.get(s..)?;
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let body = rest.get(1..)?;
    let body = body.get(..body.find(quote)?)?;
    body.split(';').find_map(|decl| {
        let (k, v) = decl.split_once(':')?;
        if !k.trim().eq_ignore_ascii_case("height") {
            return None;
        }
        let v = v.trim().to_ascii_lowercase();
        v.strip_suffix("px")?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|h| h.is_finite())
    })
}

/// A chart met while scanning: its element and the option it was given, if any.
struct Found {
    /// The element id (empty when not known).
    element_id: String,
    /// The merged options of its `setOption` calls.
    option: Option<Value>,
}

/// State of the scan over a report's scripts.
struct Scan {
    /// Literal variables declared so far.
    vars: Vars,
    /// Variables holding a DOM element, with the element's id.
    elements: HashMap<String, String>,
    /// Variables holding a chart, with the chart's index in `charts`.
    chart_vars: HashMap<String, usize>,
    /// Charts in the order they were created.
    charts: Vec<Found>,
    /// Value nodes still allowed to be built.
    budget: usize,
    /// Bytes that expression reading may still pass over.
    read_budget: usize,
}

impl Scan {
    /// Reads the expression at `p` (see [`jslit::parse_expr_at`]) while the read budget lasts.
    fn read(&mut self, src: &str, p: usize) -> (Option<Value>, usize) {
        if self.read_budget == 0 {
            return (None, p);
        }
        let (v, end) = jslit::parse_expr_at(src, p, &self.vars, &mut self.budget);
        self.read_budget = self.read_budget.saturating_sub(end.saturating_sub(p));
        (v, end)
    }

    /// Scans one script for declarations, chart creations and `setOption` calls.
    fn script(&mut self, src: &str) {
        let b = src.as_bytes();
        let mut i = 0;
        while let Some(&c) = b.get(i) {
            if matches!(c, b'"' | b'\'' | b'`') {
                i = jslit::skip_string(src, i);
            } else if c == b'/' && matches!(b.get(i.saturating_add(1)), Some(b'/' | b'*')) {
                i = jslit::skip_blank(src, i);
            } else if jslit::is_ident_start(c) {
                let (word, end) = jslit::ident_at(src, i);
                let after_dot = i > 0 && b.get(i.saturating_sub(1)) == Some(&b'.');
                i = self.word(src, word, end, after_dot).max(end);
            } else {
                i = i.saturating_add(1);
            }
        }
    }

    /// Handles the identifier `word` that ends at `end`; returns where to go on scanning.
    fn word(&mut self, src: &str, word: &str, end: usize, after_dot: bool) -> usize {
        match word {
            "var" | "let" | "const" => {
                let (name, name_end) = jslit::ident_at(src, jslit::skip_blank(src, end));
                match assignment(src, name_end) {
                    Some(p) if !name.is_empty() => self.assign(src, name, p),
                    _ => end,
                }
            }
            "echarts" if !after_dot => match call_after(src, end, "init") {
                Some(p) => self.init(src, p).1,
                None => end,
            },
            _ => {
                if let Some(p) = call_after(src, end, "setOption") {
                    return match self.chart_vars.get(word).copied() {
                        Some(idx) => self.set_option(src, idx, p),
                        None => p,
                    };
                }
                match assignment(src, end) {
                    Some(p) if !after_dot => self.assign(src, word, p),
                    _ => end,
                }
            }
        }
    }

    /// Handles `name = <expression at p>`; returns where to go on scanning.
    fn assign(&mut self, src: &str, name: &str, p: usize) -> usize {
        let j = jslit::skip_blank(src, p);
        let (word, word_end) = jslit::ident_at(src, j);
        if word == "echarts"
            && let Some(q) = call_after(src, word_end, "init")
        {
            let (idx, end) = self.init(src, q);
            if let Some(idx) = idx {
                self.chart_vars.insert(name.to_string(), idx);
            }
            return end;
        }
        if let Some((id, end)) = element_ref(src, j) {
            self.elements.insert(name.to_string(), id);
            return end;
        }
        let (v, end) = self.read(src, j);
        match v {
            Some(v) => {
                self.vars.insert(name.to_string(), v);
                end
            }
            None => j,
        }
    }

    /// Handles `echarts.init(` whose arguments start at `p`: the chart's index (if one could
    /// be kept) and the offset after the call (and after a chained `.setOption(...)`).
    fn init(&mut self, src: &str, p: usize) -> (Option<usize>, usize) {
        let j = jslit::skip_blank(src, p);
        let id = match element_ref(src, j) {
            Some((id, _)) => id,
            None => {
                let name = jslit::ident_at(src, j).0;
                self.elements.get(name).cloned().unwrap_or_default()
            }
        };
        let end = jslit::skip_call_args(src, p);
        let existing = self
            .charts
            .iter()
            .position(|c| !id.is_empty() && c.element_id == id);
        let idx = existing.or_else(|| {
            (self.charts.len() < MAX_CHARTS).then(|| {
                self.charts.push(Found {
                    element_id: id,
                    option: None,
                });
                self.charts.len().saturating_sub(1)
            })
        });
        match (idx, call_after(src, end, "setOption")) {
            (Some(idx), Some(q)) => (Some(idx), self.set_option(src, idx, q)),
            _ => (idx, end),
        }
    }

    /// Reads the option of a `setOption(` whose argument starts at `p` into chart `idx`;
    /// returns where to go on scanning.
    fn set_option(&mut self, src: &str, idx: usize, p: usize) -> usize {
        let (v, end) = self.read(src, p);
        let Some(Value::Object(new)) = v else {
            return p;
        };
        if let Some(found) = self.charts.get_mut(idx) {
            match &mut found.option {
                Some(Value::Object(old)) => old.extend(new),
                slot => *slot = Some(Value::Object(new)),
            }
        }
        end
    }
}

/// If a plain `=` (not `==` or `=>`) follows `end`, the offset just after it.
fn assignment(src: &str, end: usize) -> Option<usize> {
    let k = jslit::skip_blank(src, end);
    let b = src.as_bytes();
    let next = b.get(k.saturating_add(1)).copied();
    (b.get(k) == Some(&b'=') && next != Some(b'=') && next != Some(b'>'))
        .then(|| k.saturating_add(1))
}

/// If `.method(` follows `end` (blanks allowed), the offset just after its `(`.
fn call_after(src: &str, end: usize, method: &str) -> Option<usize> {
    let b = src.as_bytes();
    let k = jslit::skip_blank(src, end);
    if b.get(k) != Some(&b'.') {
        return None;
    }
    let (name, name_end) = jslit::ident_at(src, jslit::skip_blank(src, k.saturating_add(1)));
    let k = jslit::skip_blank(src, name_end);
    (name == method && b.get(k) == Some(&b'(')).then(|| k.saturating_add(1))
}

/// Reads `document.getElementById('x')` or `document.querySelector('#x')` at `j`: the id and
/// the offset after the call.
fn element_ref(src: &str, j: usize) -> Option<(String, usize)> {
    let (word, end) = jslit::ident_at(src, j);
    if word != "document" {
        return None;
    }
    let p =
        call_after(src, end, "getElementById").or_else(|| call_after(src, end, "querySelector"))?;
    let (s, after) = jslit::read_string(src, jslit::skip_blank(src, p));
    let s = s?;
    let close = jslit::skip_blank(src, after);
    if src.as_bytes().get(close) != Some(&b')') {
        return None;
    }
    let id = s.trim().trim_start_matches('#').to_string();
    Some((id, close.saturating_add(1)))
}

/// Tests of the whole module on small reports.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The report of the brief: two bar series on a category axis.
    const SALES: &str = r#"<h2>2024 sales by region and quarter</h2>
<div id="chart" style="width:100%;height:360px"></div>
<script>
var chart = echarts.init(document.getElementById('chart'));
chart.setOption({
 animation: false,
 tooltip: {trigger: 'axis'},
 legend: {top: 0},
 grid: {left: 70, right: 20, top: 40, bottom: 30},
 xAxis: {type: 'category', data: ['Q1', 'Q2', 'Q3', 'Q4']},
 yAxis: {type: 'value'},
 series: [{"name":"Central","type":"bar","data":[117325,157323,121285,177159]},{"name":"East","type":"bar","data":[214077,173412,201888,198922]}]
});
</script>"#;

    /// Number of times `needle` occurs in `hay`.
    fn count(hay: &str, needle: &str) -> usize {
        hay.matches(needle).count()
    }

    /// Wraps a script body in a report with one chart element.
    fn report(script: &str) -> String {
        format!("<div id=\"c\" style=\"height: 400px\"></div><script>{script}</script>")
    }

    /// The report of the brief: one grouped bar chart, its labels and legend.
    #[test]
    fn bar_report() {
        let charts = static_charts(SALES);
        assert_eq!(charts.len(), 1);
        let c = &charts[0];
        assert_eq!(c.element_id, "chart");
        assert_eq!(c.title, None);
        assert_eq!(count(&c.svg, r#"class="bar""#), 8);
        assert_eq!(count(&c.svg, r#"class="legend""#), 2);
        for text in [">Central<", ">East<", ">Q1<", ">Q2<", ">Q3<", ">Q4<"] {
            assert_eq!(count(&c.svg, text), 1, "{text}");
        }
        assert!(c.svg.contains(r#"viewBox="0 0 720 360""#));
        assert!(
            c.svg
                .contains(r#"aria-label="Bar chart: Central, East by Q1–Q4""#)
        );
        assert!(c.svg.contains(">250,000<"), "thousands separators");
        assert_eq!(count(&c.svg, "<script"), 0);
    }

    /// A donut pie reached through `querySelector` and an option variable.
    #[test]
    fn pie_donut_with_title() {
        let html = report(
            "const c = echarts.init(document.querySelector('#c'), null, {renderer:'svg'});
             const opt = {title: {text: 'Share', subtext: 'of 2024'}, series: [{type: 'pie',
               radius: ['40%', '70%'], data: [{name: 'A', value: 1}, {name: 'B', value: 3},]}]};
             c.setOption(opt);",
        );
        let charts = static_charts(&html);
        assert_eq!(charts.len(), 1);
        let c = &charts[0];
        assert_eq!(c.element_id, "c");
        assert_eq!(c.title.as_deref(), Some("Share"));
        assert_eq!(count(&c.svg, r#"class="slice""#), 2);
        assert_eq!(count(&c.svg, r#"class="legend""#), 2);
        assert!(c.svg.contains(">25%<") && c.svg.contains(">75%<"));
        assert!(c.svg.contains(r#"viewBox="0 0 720 400""#));
        assert!(c.svg.contains(r#"aria-label="Share. Pie chart: A, B""#));
        assert!(c.svg.contains(">of 2024<"));
    }

    /// A line whose categories are an earlier constant, with comments and odd numbers.
    #[test]
    fn line_with_identifier_categories() {
        let html = report(
            "// quarters
             const quarters = ['Q1', \"Q2\", 'Q3',]; /* three */
             let myChart = echarts.init(document.getElementById(\"c\"));
             myChart.setOption({xAxis: {data: quarters, name: 'Quarter'}, yAxis: {},
               series: [{name: 'Sales', type: 'line', areaStyle: {}, data: [1e3, -5, .5]}]});",
        );
        let charts = static_charts(&html);
        assert_eq!(charts.len(), 1);
        let svg = &charts[0].svg;
        assert_eq!(count(svg, r#"class="line""#), 1);
        assert_eq!(count(svg, r#"class="area""#), 1);
        assert_eq!(count(svg, r#"class="point""#), 3);
        assert_eq!(count(svg, r#"class="legend""#), 0);
        assert!(svg.contains(">Q1<") && svg.contains(">Q3<") && svg.contains(">Quarter<"));
        assert!(svg.contains(">-200<"), "negative ticks below zero");
        assert!(svg.contains(r#"aria-label="Line chart: Sales by Q1–Q3""#));
    }

    /// Two charts in two scripts: a stacked horizontal bar and a `dataset` chart.
    #[test]
    fn two_charts_and_dataset() {
        let html = r#"<div id="a"></div><div id='b' style='height:200px'></div>
            <script src="echarts.min.js"></script>
            <script>
            var one = echarts.init(document.getElementById('a'));
            one.setOption({yAxis: {type: 'category', data: ['x', 'y']}, xAxis: {type: 'value'},
                series: [{type: 'bar', stack: 't', data: [1, 2]}, {type: 'bar', stack: 't', data: [3, 4]}]});
            </script><script>
            var el = document.getElementById('b');
            var two = echarts.init(el);
            two.setOption({dataset: {source: [['k', 'u', 'v'], ['m', 1, 2], ['n', 3, '-']]},
                xAxis: {type: 'category'}, yAxis: {}, series: [{type: 'bar'}, {type: 'line'}]});
            </script>"#;
        let charts = static_charts(html);
        assert_eq!(charts.len(), 2);
        assert_eq!(charts[0].element_id, "a");
        assert_eq!(count(&charts[0].svg, r#"class="bar""#), 4);
        assert!(charts[0].svg.contains(r#"viewBox="0 0 720 360""#));
        assert_eq!(charts[1].element_id, "b");
        assert!(charts[1].svg.contains(r#"viewBox="0 0 720 200""#));
        assert_eq!(count(&charts[1].svg, r#"class="bar""#), 2);
        assert_eq!(count(&charts[1].svg, r#"class="point""#), 1);
        assert!(charts[1].svg.contains(">m<") && charts[1].svg.contains(">n<"));
    }

    /// Functions, arrows and `new` expressions read as `null`; the rest still draws.
    #[test]
    fn function_values_are_skipped() {
        let src = "{a: function (p) { return p.name + ', ' + '}'; }, b: x => x * 2, \
                   c: new echarts.graphic.LinearGradient(0, 0, 0, 1, [{offset: 0}]), \
                   d: (v) => { return v; }, e: 'ok', f: Math.max(1, 2), g: 0x10, h: [1,,2],}";
        let v = jslit::parse_js_literal(src, &Vars::new());
        assert_eq!(
            v,
            Some(
                json!({"a": null, "b": null, "c": null, "d": null, "e": "ok", "f": null,
                        "g": 16, "h": [1, null, 2]})
            )
        );
        let html = report(
            "var c = echarts.init(document.getElementById('c'));
             c.setOption({tooltip: {formatter: function (p) { return p.value + '%'; }},
               xAxis: {data: ['a']}, yAxis: {axisLabel: {formatter: '{value} %'}},
               series: [{type: 'bar', data: [{value: 50, name: 'a'}]}]});",
        );
        let charts = static_charts(&html);
        assert_eq!(count(&charts[0].svg, r#"class="bar""#), 1);
        assert!(charts[0].svg.contains(">50 %<"));
    }

    /// Quotes, escapes, templates, member lookups, spreads and number forms.
    #[test]
    fn literal_forms() {
        let mut vars = Vars::new();
        vars.insert("q".into(), json!({"list": [1, 2]}));
        let v = jslit::parse_js_literal(
            r#"{'s': 'it\'s \u0041\x42\n', "t": `tmpl`, u: q.list, q, n: [-1.5e2, +3, 1_000], ...q}"#,
            &vars,
        );
        assert_eq!(
            v,
            Some(
                json!({"s": "it's AB\n", "t": "tmpl", "u": [1, 2], "q": {"list": [1, 2]},
                        "n": [-150.0, 3, 1000], "list": [1, 2]})
            )
        );
        let emoji = jslit::parse_js_literal(r"['\uD83D\uDE00\u{1F600}\uDBFF\uDFFF']", &vars);
        assert_eq!(emoji, Some(json!(["\u{1F600}\u{1F600}\u{10FFFF}"])));
        assert_eq!(jslit::parse_js_literal("[1, 2] + 1", &vars), None);
        assert_eq!(jslit::parse_js_literal("`a${b}`", &vars), None);
        assert_eq!(jslit::parse_js_literal("unknown", &vars), None);
    }

    /// Markup in names and titles comes out as inert text; unsafe colors are dropped.
    #[test]
    fn hostile_strings_are_escaped() {
        let html = report(
            r#"var c = echarts.init(document.getElementById('c'));
             c.setOption({title: {text: '<b>&"T"'}, xAxis: {data: ['</text><script>alert(1)<\/script>']},
               yAxis: {}, series: [{name: '</text><script>x<\/script>', type: 'bar', data: [1],
               itemStyle: {color: 'url(http://evil/x)'}}]});"#,
        );
        let charts = static_charts(&html);
        let svg = &charts[0].svg;
        assert_eq!(charts[0].title.as_deref(), Some("<b>&\"T\""));
        assert_eq!(count(svg, "<script"), 0);
        assert_eq!(count(svg, "http://"), 1, "only the xmlns namespace");
        assert_eq!(count(svg, "&lt;/text&gt;&lt;script&gt;x&lt;/script&gt;"), 2);
        assert_eq!(count(svg, ">&lt;/text&gt;&lt;script&gt;al…<"), 1);
        assert!(svg.contains("&lt;b&gt;&amp;&quot;T&quot;"));
        assert!(svg.contains(r##"class="bar""##) && svg.contains(r##"fill="#5470c6""##));
    }

    /// Deep nesting, cut-off text, copy bombs, too many charts and rescans stay bounded.
    #[test]
    fn hostile_structure_does_not_hang() {
        let deep = "[".repeat(10_000);
        assert_eq!(jslit::parse_js_literal(&deep, &Vars::new()), None);
        let closed = format!("{deep}{}", "]".repeat(10_000));
        let mut v = jslit::parse_js_literal(&closed, &Vars::new()).unwrap();
        let mut depth = 0;
        while let Some(inner) = v.get(0).cloned() {
            depth += 1;
            v = inner;
        }
        assert_eq!((depth, v), (jslit::MAX_DEPTH + 1, Value::Null));
        let html = report(&format!(
            "var c = echarts.init(document.getElementById('c')); c.setOption({{series: {deep}"
        ));
        let charts = static_charts(&html);
        assert_eq!(charts.len(), 1);
        assert!(charts[0].svg.contains("Chart not drawn"));
        assert_eq!(jslit::parse_js_literal("'abc", &Vars::new()), None);
        let html = report(
            "var c = echarts.init(document.getElementById('c')); c.setOption({title: {text: 'x",
        );
        let charts = static_charts(&html);
        assert_eq!(charts.len(), 1);
        assert!(charts[0].svg.contains("its options could not be read"));
        let bomb = "var a = [1,2,3,4,5,6,7,8,9,10]; var b = [a,a,a,a,a,a,a,a,a,a]; \
                    var c2 = [b,b,b,b,b,b,b,b,b,b]; var d = [c2,c2,c2,c2,c2,c2,c2,c2,c2,c2]; \
                    var e = [d,d,d,d,d,d,d,d,d,d]; var f = [e,e,e,e,e,e,e,e,e,e]; \
                    var g = [f,f,f,f,f,f,f,f,f,f]; var h = [g,g,g,g,g,g,g,g,g,g];";
        let many: String = (0..40)
            .map(|i| format!("var x{i} = echarts.init(document.getElementById('e{i}'));"))
            .collect();
        assert_eq!(
            static_charts(&report(&format!("{bomb}{many}"))).len(),
            MAX_CHARTS
        );
    }

    /// An undrawn kind is named in words; scripts without ECharts give nothing.
    #[test]
    fn unknown_kind_and_no_echarts() {
        let html = report(
            "var c = echarts.init(document.getElementById('c'));
             c.setOption({title: {text: 'Flows'}, series: [{type: 'sankey', data: []}]});",
        );
        let charts = static_charts(&html);
        assert_eq!(charts.len(), 1);
        assert_eq!(charts[0].title.as_deref(), Some("Flows"));
        assert!(charts[0].svg.contains("Chart not drawn"));
        assert_eq!(
            count(&charts[0].svg, "&#39;sankey&#39; charts are not drawn"),
            3
        );
        assert!(static_charts(&report("console.log('echarts.init(x)'); var a = 1;")).is_empty());
        assert!(static_charts("<p>no scripts</p>").is_empty());
    }

    /// Scatter `[x, y]` pairs on two value axes, gaps skipped.
    #[test]
    fn scatter_pairs() {
        let html = report(
            "var s = echarts.init(document.getElementById('c'));
             s.setOption({xAxis: {}, yAxis: {}, series: [{type: 'scatter', data: [[1, 2], [3, 4], null, [5, 'x']]}]});",
        );
        let charts = static_charts(&html);
        assert_eq!(count(&charts[0].svg, r#"class="dot""#), 2);
        assert!(
            charts[0]
                .svg
                .contains(r#"aria-label="Scatter chart: Series 1""#)
        );
    }
}
