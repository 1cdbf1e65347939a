//! The report as one HTML document that needs nothing else: the images it shows embedded as
//! `data:` URIs, its other files linked to `files/` beside it.

use std::fmt::Write as _;

use base64::Engine as _;

use super::sanitise::{Allowed, Slot, clean_html, escape, fill};
use super::{MAX_EMBEDDED_TOTAL, Packaging, Parts, Words};

/// The HTML document's stylesheet: a readable page on screen and a clean one on paper.
const STYLE: &str = "\
:root{color-scheme:light}\
body{font:15px/1.55 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2330;background:#fff;margin:0}\
article{max-width:900px;margin:0 auto;padding:32px 24px 48px}\
h1{font-size:1.6em;margin:0 0 4px}\
.meta{color:#5b6475;font-size:.85em;margin:0 0 16px}\
.question{background:#f3f5f9;border-left:4px solid #5470c6;padding:10px 14px;margin:0 0 24px}\
.question p{margin:0;white-space:pre-wrap}\
.question .attached{color:#5b6475;font-size:.9em;margin-top:6px}\
table{border-collapse:collapse;margin:12px 0;font-variant-numeric:tabular-nums}\
th,td{border:1px solid #c9cfdb;padding:4px 10px;text-align:left}\
th{background:#eef1f6}\
figure{margin:16px 0}\
figure.chart img{width:100%;height:auto;border:1px solid #e1e5ec}\
figure.image img{max-width:100%}\
figcaption{color:#5b6475;font-size:.85em;margin:4px 0}\
pre{background:#f6f8fa;border:1px solid #e1e5ec;padding:10px 12px;overflow-x:auto;font:13px/1.45 ui-monospace,Menlo,Consolas,monospace}\
code{font-family:ui-monospace,Menlo,Consolas,monospace}\
.files li{margin:2px 0}\
.files .size,.files .note{color:#5b6475;font-size:.85em}\
footer{margin-top:32px;color:#5b6475;font-size:.8em;border-top:1px solid #e1e5ec;padding-top:8px}\
@media print{\
@page{margin:18mm 16mm}\
body{font-size:11pt}\
article{max-width:none;padding:0}\
a{color:inherit;text-decoration:none}\
.question{background:none;border-left:3px solid #888}\
pre{white-space:pre-wrap;word-break:break-word;background:none}\
table,figure,pre,tr{break-inside:avoid}\
h1,h2,h3{break-after:avoid}\
}";

fn data_uri(media_type: &str, bytes: &[u8]) -> String {
    format!(
        "data:{media_type};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A size in words a reader takes in at a glance (`980 bytes`, `12.4 KB`, `3.1 MB`).
pub(crate) fn size(bytes: u64, words: &Words) -> String {
    let b = bytes as f64;
    if bytes < 1000 {
        format!("{bytes} {}", words.bytes)
    } else if bytes < 1_000_000 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

/// The report as one HTML document.
pub(crate) fn document(p: &Parts, packaging: Packaging) -> String {
    let body = body(p);
    let w = p.language.words();
    let mut out = String::with_capacity(body.len() + 4096);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"{}\">\n<head>\n<meta charset=\"utf-8\">\n",
        p.language.tag()
    );
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         img-src data:; style-src 'unsafe-inline'\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", escape(&p.title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>\n<article>");
    let _ = write!(
        out,
        "<header><h1>{}</h1><p class=\"meta\">{} {}</p>",
        escape(&p.title),
        w.answered,
        escape(&p.answered())
    );
    let q = &p.question;
    if !q.words.is_empty() || !q.attached.is_empty() {
        let _ = write!(
            out,
            "<div class=\"question\"><p><strong>{}{}</strong>{}{}</p>",
            w.question,
            w.colon.trim_end(),
            if w.colon.ends_with(' ') { " " } else { "" },
            escape(&q.words)
        );
        if !q.attached.is_empty() {
            let _ = write!(
                out,
                "<p class=\"attached\">{}{}{}</p>",
                w.attached,
                w.colon,
                escape(&q.attached.join(", "))
            );
        }
        out.push_str("</div>");
    }
    out.push_str("</header>\n<section class=\"answer\">\n");
    out.push_str(&body);
    out.push_str("\n</section>\n");
    if !p.linked.is_empty() {
        let _ = write!(out, "<section class=\"files\"><h2>{}</h2>", w.files);
        if packaging == Packaging::Alone {
            let _ = write!(out, "<p class=\"note\">{}</p>", w.files_apart);
        }
        out.push_str("<ul>");
        for l in &p.linked {
            let _ = write!(
                out,
                "<li><a href=\"{}\">{}</a> <span class=\"size\">({})</span></li>",
                escape(&l.place.href),
                escape(&l.name),
                size(l.size, w)
            );
        }
        out.push_str("</ul></section>\n");
    }
    let _ = writeln!(
        out,
        "<footer>{}</footer>\n</article>\n</body>\n</html>",
        w.exported
    );
    out
}

/// The answer: Markdown rendered, or an HTML report with its charts marked, then cleaned, then
/// its references filled in where text stands.
fn body(p: &Parts) -> String {
    let raw = if p.is_html() {
        mark_charts(p)
    } else {
        let mut html = String::with_capacity(p.answer.response.len() * 3 / 2);
        pulldown_cmark::html::push_html(
            &mut html,
            pulldown_cmark::Parser::new_ext(&p.answer.response, super::sanitise::MARKDOWN),
        );
        html
    };
    let clean = clean_html(&raw, &Allowed::default());
    let mut left = MAX_EMBEDDED_TOTAL;
    fill(&clean, &mut |slot| block(p, slot, &mut left), &mut |slot| {
        plain(p, slot)
    })
}

/// An HTML report with a `{{CHART:k}}` paragraph where each chart's element was (or at the
/// end when it cannot be found), so the drawn chart stands where the script would have drawn.
pub(crate) fn mark_charts(p: &Parts) -> String {
    let mut marked = p.answer.response.clone();
    let mut trailing = String::new();
    for (k, chart) in p.charts.iter().enumerate() {
        let marker = format!("<p>{}</p>", Slot::Chart(k).marker());
        match place_marker(&marked, &chart.element_id, &marker) {
            Some(next) => marked = next,
            None => trailing.push_str(&marker),
        }
    }
    marked.push_str(&trailing);
    marked
}

/// What a reference stands for in text.
fn block(p: &Parts, slot: Slot, left: &mut u64) -> Option<String> {
    Some(match slot {
        Slot::Code(n) => {
            let c = p.code(n)?;
            let mut caption = escape(&c.language);
            if !c.description.is_empty() {
                let _ = write!(caption, " · {}", escape(&c.description));
            }
            format!(
                "<figure class=\"code\"><figcaption>{caption}</figcaption><pre><code>{}</code></pre></figure>",
                escape(&c.code)
            )
        }
        Slot::File(n) => {
            let f = p.file(n)?;
            let Some(place) = &f.place else {
                return Some(format!("<em>{}</em>", p.language.words().gone));
            };
            match &f.image {
                Some(bytes) if (bytes.len() as u64) <= *left => {
                    *left -= bytes.len() as u64;
                    format!(
                        "<figure class=\"image\"><img alt=\"{0}\" src=\"{1}\"><figcaption>{0}</figcaption></figure>",
                        escape(&f.name),
                        data_uri(&f.media_type, bytes)
                    )
                }
                _ => file_link(&place.href, &f.name),
            }
        }
        Slot::Chart(k) => {
            let c = p.charts.get(k)?;
            format!(
                "<figure class=\"chart\"><img alt=\"{}\" src=\"{}\"></figure>",
                escape(c.title.as_deref().unwrap_or(p.language.words().chart)),
                data_uri("image/svg+xml", c.svg.as_bytes())
            )
        }
    })
}

/// A link to a file beside the report.
pub(crate) fn file_link(href: &str, name: &str) -> String {
    format!("<a href=\"{}\">{}</a>", escape(href), escape(name))
}

/// What a reference stands for inside a tag (an attribute's value): its name, as text.
pub(crate) fn plain(p: &Parts, slot: Slot) -> Option<String> {
    Some(escape(&match slot {
        Slot::Code(n) => {
            let c = p.code(n)?;
            if c.description.is_empty() {
                c.language.clone()
            } else {
                c.description.clone()
            }
        }
        Slot::File(n) => p.file(n)?.name.clone(),
        Slot::Chart(k) => p.charts.get(k)?.title.clone().unwrap_or_default(),
    }))
}

/// `html` with the element whose id is `id` replaced by `marker` (an empty element), or with
/// `marker` put first inside it; `None` when no element has that id.
fn place_marker(html: &str, id: &str, marker: &str) -> Option<String> {
    let at = ["\"", "'"]
        .iter()
        .filter_map(|q| html.find(&format!("id={q}{id}{q}")))
        .min()?;
    let open = html.get(..at)?.rfind('<')?;
    let name: String = html
        .get(open + 1..)?
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect();
    let end = at + html.get(at..)?.find('>')? + 1;
    let rest = html.get(end..)?;
    let close = format!("</{name}>");
    let mut out = String::with_capacity(html.len() + marker.len());
    out.push_str(html.get(..open)?);
    if !name.is_empty() && rest.trim_start().to_ascii_lowercase().starts_with(&close) {
        out.push_str(marker);
        let skipped = rest.len() - rest.trim_start().len() + close.len();
        out.push_str(rest.get(skipped..)?);
    } else {
        out.push_str(html.get(open..end)?);
        out.push_str(marker);
        out.push_str(rest);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_replace_empty_chart_elements_or_go_inside() {
        let html = "<h2>x</h2><div id=\"chart\" style=\"height:300px\"></div><p>after</p>";
        assert_eq!(
            place_marker(html, "chart", "<p>M</p>").as_deref(),
            Some("<h2>x</h2><p>M</p><p>after</p>")
        );
        let full = "<div id='c'><span>legend</span></div>";
        assert_eq!(
            place_marker(full, "c", "M").as_deref(),
            Some("<div id='c'>M<span>legend</span></div>")
        );
        assert_eq!(place_marker(html, "other", "M"), None);
    }

    #[test]
    fn sizes_read_at_a_glance() {
        let w = crate::Language::English.words();
        assert_eq!(size(980, w), "980 bytes");
        assert_eq!(size(12_400, w), "12.4 KB");
        assert_eq!(size(3_100_000, w), "3.1 MB");
        let zh = crate::Language::SimplifiedChinese.words();
        assert_eq!(size(980, zh), "980 字节");
    }
}
