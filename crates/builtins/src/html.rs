//! HTML to Markdown for `web_reader`, over the html5ever parser (through `scraper`, which
//! parses as browsers do: unclosed tags, stray `<`, entities, scripts).
//!
//! The main content is kept: `<main>` (or `role="main"`), else the largest `<article>`, else
//! the body without its navigation, asides, headers and footers. Headings become `#` lines,
//! lists `-` / `1.` items (nested by indentation), tables Markdown tables, links
//! `[text](absolute URL)`, `<pre>` fenced blocks; scripts, styles, forms and other
//! non-text elements are dropped.

use ego_tree::NodeRef;
use reqwest::Url;
use scraper::{ElementRef, Html, Node, Selector};

/// Elements whose content is never text for a reader.
const DROPPED: [&str; 13] = [
    "script", "style", "noscript", "template", "svg", "iframe", "head", "form", "button", "select",
    "textarea", "object", "canvas",
];

/// Page furniture dropped when the whole body is rendered (kept inside `<main>`/`<article>`).
const FURNITURE: [&str; 4] = ["nav", "aside", "footer", "header"];

/// Deeper nesting than this is rendered as plain text, so hostile pages cannot exhaust the
/// stack.
const MAX_DEPTH: usize = 256;

/// The title of a page and its main content as Markdown. `base` resolves relative links.
pub fn html_to_markdown(html: &str, base: Option<&Url>) -> (Option<String>, String) {
    let doc = Html::parse_document(html);
    let title = select_first(&doc, "title")
        .map(|t| collapse(&t.text().collect::<String>()))
        .filter(|t| !t.is_empty());
    let (root, furniture) = main_content(&doc);
    let renderer = Renderer {
        base,
        drop_furniture: furniture,
    };
    let mut out = Out::default();
    renderer.walk(*root, &mut out, 0);
    (title, tidy(&out.s))
}

fn select_first<'a>(doc: &'a Html, css: &str) -> Option<ElementRef<'a>> {
    let selector = Selector::parse(css).ok()?;
    doc.select(&selector).next()
}

/// The element holding the main content, and whether page furniture must be dropped in it.
fn main_content(doc: &Html) -> (ElementRef<'_>, bool) {
    if let Some(main) = select_first(doc, "main, [role=main]") {
        return (main, false);
    }
    if let Ok(selector) = Selector::parse("article") {
        let largest = doc
            .select(&selector)
            .max_by_key(|a| a.text().map(str::len).sum::<usize>());
        if let Some(article) = largest {
            return (article, false);
        }
    }
    match select_first(doc, "body") {
        Some(body) => (body, true),
        None => (doc.root_element(), true),
    }
}

/// Text being written, with whitespace collapsed the way a browser shows it.
#[derive(Default)]
struct Out {
    s: String,
    space: bool,
}

impl Out {
    fn text(&mut self, t: &str) {
        for c in t.chars() {
            if c.is_whitespace() {
                self.space = true;
                continue;
            }
            if self.space && !self.s.is_empty() && !self.s.ends_with(['\n', ' ']) {
                self.s.push(' ');
            }
            self.space = false;
            self.s.push(c);
        }
    }

    fn raw(&mut self, t: &str) {
        if self.space && !self.s.is_empty() && !self.s.ends_with(['\n', ' ']) && !t.is_empty() {
            self.s.push(' ');
        }
        self.space = false;
        self.s.push_str(t);
    }

    fn newline(&mut self) {
        self.trim_end_spaces();
        if !self.s.is_empty() && !self.s.ends_with('\n') {
            self.s.push('\n');
        }
        self.space = false;
    }

    fn blank(&mut self) {
        self.trim_end_spaces();
        if self.s.is_empty() {
            return;
        }
        while !self.s.ends_with("\n\n") {
            self.s.push('\n');
        }
        self.space = false;
    }

    fn trim_end_spaces(&mut self) {
        let trimmed = self.s.trim_end_matches([' ', '\t']).len();
        self.s.truncate(trimmed);
    }
}

struct Renderer<'a> {
    base: Option<&'a Url>,
    drop_furniture: bool,
}

impl Renderer<'_> {
    fn children(&self, node: NodeRef<'_, Node>, out: &mut Out, depth: usize) {
        for child in node.children() {
            self.walk(child, out, depth + 1);
        }
    }

    /// The node's content as one line (headings, links, table cells).
    fn inline(&self, node: NodeRef<'_, Node>, depth: usize) -> String {
        let mut out = Out::default();
        self.children(node, &mut out, depth);
        collapse(&out.s)
    }

    /// The node's content as blocks (list items, quotes).
    fn blocks(&self, node: NodeRef<'_, Node>, depth: usize) -> String {
        let mut out = Out::default();
        self.children(node, &mut out, depth);
        tidy(&out.s)
    }

    fn walk(&self, node: NodeRef<'_, Node>, out: &mut Out, depth: usize) {
        if depth > MAX_DEPTH {
            for text in node.descendants().filter_map(|n| n.value().as_text()) {
                out.text(text);
            }
            return;
        }
        let element = match node.value() {
            Node::Text(t) => {
                out.text(t);
                return;
            }
            Node::Element(e) => e,
            Node::Document | Node::Fragment => {
                self.children(node, out, depth);
                return;
            }
            _ => return,
        };
        let name = element.name();
        if DROPPED.contains(&name) || (self.drop_furniture && FURNITURE.contains(&name)) {
            return;
        }
        match name {
            "br" => out.newline(),
            "hr" => {
                out.blank();
                out.raw("---");
                out.blank();
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                let text = self.inline(node, depth);
                if !text.is_empty() {
                    out.blank();
                    out.raw(&format!("{} {text}", "#".repeat(level)));
                    out.blank();
                }
            }
            "ul" | "ol" => self.list(node, name == "ol", out, depth),
            "table" => self.table(node, out, depth),
            "pre" => {
                let text: String = node
                    .descendants()
                    .filter_map(|n| n.value().as_text().map(|t| t.to_string()))
                    .collect();
                out.blank();
                out.raw(&format!("```\n{}\n```", text.trim_matches('\n')));
                out.blank();
            }
            "blockquote" => {
                let inner = self.blocks(node, depth);
                out.blank();
                let quoted: Vec<String> = inner.lines().map(|l| format!("> {l}")).collect();
                out.raw(&quoted.join("\n"));
                out.blank();
            }
            "a" => {
                let text = self.inline(node, depth);
                match element.attr("href").and_then(|h| self.link(h)) {
                    Some(href) if !text.is_empty() => out.raw(&format!("[{text}]({href})")),
                    _ => out.text(&text),
                }
            }
            "strong" | "b" => self.wrap(node, "**", out, depth),
            "em" | "i" => self.wrap(node, "*", out, depth),
            "code" => self.wrap(node, "`", out, depth),
            "img" => {
                if let Some(alt) = element.attr("alt").map(collapse).filter(|a| !a.is_empty()) {
                    out.text(&format!("[image: {alt}]"));
                }
            }
            "li" | "p" | "div" | "section" | "article" | "main" | "header" | "footer" | "aside"
            | "nav" | "figure" | "figcaption" | "address" | "dl" | "dt" | "dd" | "body"
            | "html" | "details" | "summary" | "caption" => {
                out.blank();
                self.children(node, out, depth);
                out.blank();
            }
            _ => self.children(node, out, depth),
        }
    }

    fn wrap(&self, node: NodeRef<'_, Node>, mark: &str, out: &mut Out, depth: usize) {
        let text = self.inline(node, depth);
        if !text.is_empty() {
            out.raw(&format!("{mark}{text}{mark}"));
        }
    }

    fn link(&self, href: &str) -> Option<String> {
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') || href.starts_with("javascript:") {
            return None;
        }
        match self.base {
            Some(base) => base.join(href).ok().map(|u| u.to_string()),
            None => Some(href.to_owned()),
        }
    }

    fn list(&self, node: NodeRef<'_, Node>, ordered: bool, out: &mut Out, depth: usize) {
        out.blank();
        let mut n = 0;
        for item in node.children() {
            let is_item = item.value().as_element().is_some_and(|e| e.name() == "li");
            let inner = if is_item {
                self.blocks(item, depth + 1)
            } else {
                // Text or a stray element directly in the list.
                let mut o = Out::default();
                self.walk(item, &mut o, depth + 1);
                tidy(&o.s)
            };
            if inner.is_empty() {
                continue;
            }
            n += 1;
            let marker = if ordered {
                format!("{n}. ")
            } else {
                "- ".to_owned()
            };
            let indent = " ".repeat(marker.len());
            out.newline();
            for (i, line) in inner.lines().filter(|l| !l.trim().is_empty()).enumerate() {
                if i == 0 {
                    out.raw(&format!("{marker}{line}"));
                } else {
                    out.raw(&format!("\n{indent}{line}"));
                }
            }
        }
        out.blank();
    }

    fn table(&self, node: NodeRef<'_, Node>, out: &mut Out, depth: usize) {
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut caption = None;
        let mut stack: Vec<NodeRef<'_, Node>> = node.children().collect();
        stack.reverse();
        while let Some(child) = stack.pop() {
            let Some(e) = child.value().as_element() else {
                continue;
            };
            match e.name() {
                "thead" | "tbody" | "tfoot" => {
                    let mut inner: Vec<_> = child.children().collect();
                    inner.reverse();
                    stack.extend(inner);
                }
                "caption" => caption = Some(self.inline(child, depth)),
                "tr" => {
                    let cells: Vec<String> = child
                        .children()
                        .filter(|c| {
                            c.value()
                                .as_element()
                                .is_some_and(|e| matches!(e.name(), "td" | "th"))
                        })
                        .map(|c| self.inline(c, depth + 1).replace('|', "\\|"))
                        .collect();
                    if !cells.is_empty() {
                        rows.push(cells);
                    }
                }
                _ => {}
            }
        }
        if rows.is_empty() {
            return;
        }
        out.blank();
        if let Some(c) = caption.filter(|c| !c.is_empty()) {
            out.raw(&c);
            out.blank();
        }
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        let line = |cells: &[String]| {
            let mut padded: Vec<&str> = cells.iter().map(String::as_str).collect();
            padded.resize(width, "");
            format!("| {} |", padded.join(" | "))
        };
        let mut text = line(&rows[0]);
        text.push('\n');
        text.push_str(&format!("|{}", " --- |".repeat(width)));
        for row in &rows[1..] {
            text.push('\n');
            text.push_str(&line(row));
        }
        out.raw(&text);
        out.blank();
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trailing spaces cut, runs of blank lines made one, the ends trimmed.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() {
            blank = !out.is_empty();
            continue;
        }
        if blank {
            out.push_str("\n\n");
        } else if !out.is_empty() {
            out.push('\n');
        }
        blank = false;
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_becomes_markdown() {
        let html = "<html><head><title>Q3 &amp; more</title><style>p{}</style></head><body>\
            <nav><a href='/'>Home</a></nav><script>var x = '<p>';</script>\
            <h1>Sales</h1><p>West grew&nbsp;42% (<a href='/q3.html'>details</a>).</p>\
            <ul><li>one</li><li>two &#x263A;<ol><li>nested</li></ol></li></ul><!-- hidden -->\
            <table><tr><th>region</th><th>q3</th></tr><tr><td>West</td><td>444 | 645</td></tr>\
            </table><footer>© us</footer></body></html>";
        let base = Url::parse("https://example.com/reports/").unwrap();
        let (title, text) = html_to_markdown(html, Some(&base));
        assert_eq!(title.as_deref(), Some("Q3 & more"));
        assert_eq!(
            text,
            "# Sales\n\nWest grew 42% ([details](https://example.com/q3.html)).\n\n\
             - one\n- two ☺\n  1. nested\n\n\
             | region | q3 |\n| --- | --- |\n| West | 444 \\| 645 |"
        );
    }

    #[test]
    fn main_content_wins_over_the_page() {
        let html = "<body><header>Site</header><main><h2>Report</h2><p>Body</p>\
            <aside>kept inside main</aside></main><footer>x</footer></body>";
        let (_, text) = html_to_markdown(html, None);
        assert_eq!(text, "## Report\n\nBody\n\nkept inside main");
    }

    #[test]
    fn malformed_and_deep_markup_degrade_to_text() {
        let (_, text) = html_to_markdown("a < b <p>c &bogus; <b>d", None);
        assert_eq!(text, "a < b\n\nc &bogus; **d**");
        let deep = "<div>".repeat(5000) + "deep" + &"</div>".repeat(5000);
        let (_, text) = html_to_markdown(&deep, None);
        assert_eq!(text, "deep");
        let (_, text) = html_to_markdown("<pre>  x = 1\n  y = 2\n</pre>", None);
        assert_eq!(text, "```\n  x = 1\n  y = 2\n```");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(html in "[<>/a-z &;#x0-9é\"=!|-]{0,120}") {
            let _ = html_to_markdown(&html, None);
        }

        #[test]
        fn scripts_never_show(text in "[a-z &;#x0-9é=!|>/-]{0,60}") {
            // After closed markup a script is a script, whatever text surrounds it.
            let doc = format!("<p>{text}</p><script>SECRET</script><td>{text}");
            let (_, shown) = html_to_markdown(&doc, None);
            proptest::prop_assert!(!shown.contains("SECRET"));
        }
    }
}
