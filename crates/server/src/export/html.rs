//! The two renderings of a report: Markdown and a self-contained HTML document.

use std::fmt::Write as _;

use base64::Engine as _;

use super::chart::{StaticChart, static_charts};
use super::{FilePart, Parts};

/// The HTML document's stylesheet: a readable page on screen and a clean one on paper.
const STYLE: &str = "\
:root{color-scheme:light}\
body{font:15px/1.55 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1d2330;background:#fff;margin:0}\
article{max-width:900px;margin:0 auto;padding:32px 24px 48px}\
h1{font-size:1.6em;margin:0 0 4px}\
.meta{color:#5b6475;font-size:.85em;margin:0 0 16px}\
.question{background:#f3f5f9;border-left:4px solid #5470c6;padding:10px 14px;margin:0 0 24px;white-space:pre-wrap}\
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

/// `text` with `&`, `<`, `>`, `"` and `'` escaped.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for a path segment.
pub(crate) fn url_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn data_uri(media_type: &str, bytes: &[u8]) -> String {
    format!(
        "data:{media_type};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// A code fence longer than any run of backticks in `code`.
fn fence(code: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat(longest.max(2) + 1)
}

/// The report as Markdown.
pub(crate) fn markdown(p: &Parts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", p.title.replace('\n', " "));
    let _ = writeln!(
        out,
        "Conversation `{}` · answer {} · {}\n",
        p.conversation, p.seq, p.answered_at
    );
    if !p.question.is_empty() {
        let quoted: Vec<String> = p.question.lines().map(|l| format!("> {l}")).collect();
        let _ = writeln!(out, "> **Question**\n>\n{}\n", quoted.join("\n"));
    }
    let body = if p.is_html() {
        // Raw HTML is Markdown too: the sanitised report, charts as images.
        format!("{}\n", html_report(p))
    } else {
        let mut text = p.answer.response.clone();
        for (index, language, description, code) in &p.codes {
            let f = fence(code);
            let caption = if description.is_empty() {
                String::new()
            } else {
                format!("\n\n*{description}*")
            };
            let block = format!(
                "{f}{language}\n{}\n{f}{caption}",
                code.trim_end_matches('\n')
            );
            text = own_paragraph(&text, &format!("{{{{CODE:{index}}}}}"), &block);
        }
        for f in &p.files {
            let link = p.file_link(&f.file_id);
            let md = if f.image.is_some() {
                format!("![{}]({link})", f.name.replace(']', ""))
            } else {
                format!("[{}]({link})", f.name.replace(']', ""))
            };
            text = text.replace(&format!("{{{{FILE:{}}}}}", f.index), &md);
        }
        text
    };
    out.push_str(body.trim_end());
    out.push('\n');
    let links = downloads(p);
    if !links.is_empty() {
        out.push_str("\n## Files\n\n");
        for (name, link) in links {
            let _ = writeln!(out, "- [{}]({link})", name.replace(']', ""));
        }
    }
    out
}

/// `text` with each `placeholder` replaced by `block`, a blank line before and after it.
fn own_paragraph(text: &str, placeholder: &str, block: &str) -> String {
    let mut out = String::with_capacity(text.len() + block.len());
    let mut rest = text;
    while let Some(at) = rest.find(placeholder) {
        let before = rest
            .get(..at)
            .unwrap_or_default()
            .trim_end_matches([' ', '\n']);
        out.push_str(before);
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(block);
        rest = rest
            .get(at + placeholder.len()..)
            .unwrap_or_default()
            .trim_start_matches([' ', '\n']);
        if !rest.is_empty() {
            out.push_str("\n\n");
        }
    }
    out.push_str(rest);
    out
}

/// The files an answer offers: its file references and its download links, once each.
fn downloads(p: &Parts) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for f in &p.files {
        out.push((f.name.clone(), p.file_link(&f.file_id)));
    }
    for link in &p.answer.metadata.download_links {
        let name = link.rsplit('/').next().unwrap_or(link).to_string();
        if !out.iter().any(|(_, l)| l == link) {
            out.push((name, link.clone()));
        }
    }
    out
}

/// The report as one HTML document that needs nothing else.
pub(crate) fn document(p: &Parts) -> String {
    let body = if p.is_html() {
        html_report(p)
    } else {
        placeholders(p, crate::render::markdown_html(&p.answer.response))
    };
    let mut out = String::with_capacity(body.len() + 4096);
    out.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         img-src data:; style-src 'unsafe-inline'\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", escape(&p.title));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>\n<article>");
    let _ = writeln!(
        out,
        "<header><h1>{}</h1><p class=\"meta\">Conversation <code>{}</code> · answer {} · {}</p>",
        escape(&p.title),
        escape(&p.conversation),
        p.seq,
        escape(&p.answered_at)
    );
    if !p.question.is_empty() {
        let _ = write!(
            out,
            "<p class=\"question\"><strong>Question:</strong> {}</p>",
            escape(&p.question)
        );
    }
    out.push_str("</header>\n<section class=\"answer\">\n");
    out.push_str(&body);
    out.push_str("\n</section>\n");
    let links = downloads(p);
    if !links.is_empty() {
        out.push_str("<section class=\"files\"><h2>Files</h2><ul>");
        for (name, link) in links {
            let _ = write!(
                out,
                "<li><a href=\"{}\">{}</a></li>",
                escape(&link),
                escape(&name)
            );
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str("<footer>Exported from BA-Agent.</footer>\n</article>\n</body>\n</html>\n");
    out
}

/// An HTML report, sanitised, its charts drawn as images, its references resolved.
fn html_report(p: &Parts) -> String {
    let raw = &p.answer.response;
    let charts = static_charts(raw);
    let mut marked = raw.clone();
    let mut trailing = String::new();
    for (k, chart) in charts.iter().enumerate() {
        let marker = format!("<p>{{{{CHART:{k}}}}}</p>");
        match place_marker(&marked, &chart.element_id, &marker) {
            Some(next) => marked = next,
            None => trailing.push_str(&marker),
        }
    }
    marked.push_str(&trailing);
    let mut clean = ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&marked)
        .to_string();
    for (k, chart) in charts.iter().enumerate() {
        clean = clean.replace(&format!("<p>{{{{CHART:{k}}}}}</p>"), &chart_figure(chart));
    }
    placeholders(p, clean)
}

fn chart_figure(chart: &StaticChart) -> String {
    let alt = chart.title.as_deref().unwrap_or("Chart");
    format!(
        "<figure class=\"chart\"><img alt=\"{}\" src=\"{}\"></figure>",
        escape(alt),
        data_uri("image/svg+xml", chart.svg.as_bytes())
    )
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

/// `{{CODE:N}}` and `{{FILE:N}}` in sanitised HTML, resolved: code blocks as figures, images
/// embedded, other files as links.
fn placeholders(p: &Parts, mut html: String) -> String {
    for (index, language, description, code) in &p.codes {
        let mut caption = escape(language);
        if !description.is_empty() {
            let _ = write!(caption, " · {}", escape(description));
        }
        let figure = format!(
            "<figure class=\"code\"><figcaption>{caption}</figcaption><pre><code>{}</code></pre></figure>",
            escape(code)
        );
        html = replace_placeholder(html, &format!("{{{{CODE:{index}}}}}"), &figure);
    }
    for f in &p.files {
        html = replace_placeholder(html, &format!("{{{{FILE:{}}}}}", f.index), &file_html(p, f));
    }
    html
}

fn file_html(p: &Parts, f: &FilePart) -> String {
    match &f.image {
        Some(bytes) => format!(
            "<figure class=\"image\"><img alt=\"{0}\" src=\"{1}\"><figcaption>{0}</figcaption></figure>",
            escape(&f.name),
            data_uri(&f.media_type, bytes)
        ),
        None => format!(
            "<a href=\"{}\">{}</a>",
            escape(&p.file_link(&f.file_id)),
            escape(&f.name)
        ),
    }
}

/// A placeholder alone in its paragraph takes the paragraph's place; elsewhere it is
/// replaced where it stands.
fn replace_placeholder(html: String, placeholder: &str, with: &str) -> String {
    html.replace(&format!("<p>{placeholder}</p>"), with)
        .replace(placeholder, with)
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
    fn code_blocks_stand_in_their_own_paragraph() {
        assert_eq!(
            own_paragraph("see\n\n{{CODE:0}}\n\n\nnext {{CODE:0}}", "{{CODE:0}}", "B"),
            "see\n\nB\n\nnext\n\nB"
        );
    }

    #[test]
    fn fences_outgrow_the_code() {
        assert_eq!(fence("print(1)"), "```");
        assert_eq!(fence("a ```` b"), "`````");
    }

    #[test]
    fn escaping_and_urls() {
        assert_eq!(
            escape("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
        assert_eq!(url_component("out put/é.csv"), "out%20put%2F%C3%A9.csv");
    }
}
