//! The model's text made safe to keep: its HTML cleaned with ammonia (no script, style, form,
//! frame, meta or event handler; links only to `http`, `https`, `mailto` and the report's own
//! files; no image but the report's own), its references filled in where they stand (a
//! reference inside an attribute becomes plain text there), and its Markdown rewritten until a
//! Markdown viewer would find nothing to run or follow.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::sync::Arc;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

use super::names::FOLDER;

/// The Markdown extensions a report is read with (the page's).
pub(crate) const MARKDOWN: Options = Options::ENABLE_TABLES
    .union(Options::ENABLE_STRIKETHROUGH)
    .union(Options::ENABLE_TASKLISTS);

/// How often a Markdown text is rewritten before it is given up on (shown as code instead).
const MAX_PASSES: usize = 6;

/// The links a report may hold to its own files (`files/…`, percent-encoded).
#[derive(Debug, Clone, Default)]
pub(crate) struct Allowed(Arc<HashSet<String>>);

impl Allowed {
    pub(crate) fn new(hrefs: impl IntoIterator<Item = String>) -> Self {
        Self(Arc::new(hrefs.into_iter().collect()))
    }

    fn contains(&self, href: &str) -> bool {
        self.0.contains(href)
    }
}

/// A relative link is kept when it leads to a place in the report or to one of its files.
#[derive(Debug)]
struct OwnLinks(Allowed);

impl ammonia::UrlRelativeEvaluate<'_> for OwnLinks {
    fn evaluate<'url>(&self, url: &'url str) -> Option<Cow<'url, str>> {
        (url.starts_with('#') || self.0.contains(url)).then_some(Cow::Borrowed(url))
    }
}

/// `html` with everything that could run, fetch or leave the report removed.
pub(crate) fn clean_html(html: &str, allowed: &Allowed) -> String {
    let mut builder = ammonia::Builder::default();
    builder
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .url_relative(ammonia::UrlRelative::Custom(Box::new(OwnLinks(
            allowed.clone(),
        ))))
        // An image is the report's own file or nothing: a remote one would be fetched when the
        // report is opened, telling someone it was.
        .attribute_filter(|element, attribute, value| {
            if element == "img" && attribute == "src" && !value.starts_with(&format!("{FOLDER}/")) {
                None
            } else {
                Some(Cow::Borrowed(value))
            }
        });
    builder.clean(html).to_string()
}

/// A reference the answer's text holds: `{{CODE:n}}`, `{{FILE:n}}`, or a chart's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Code(usize),
    File(usize),
    Chart(usize),
}

impl Slot {
    pub(crate) fn marker(self) -> String {
        match self {
            Self::Code(n) => format!("{{{{CODE:{n}}}}}"),
            Self::File(n) => format!("{{{{FILE:{n}}}}}"),
            Self::Chart(n) => format!("{{{{CHART:{n}}}}}"),
        }
    }
}

/// The slot whose marker starts `text`, and the marker's length.
fn slot_at(text: &str) -> Option<(Slot, usize)> {
    let rest = text.strip_prefix("{{")?;
    let (kind, rest) = rest.split_once(':')?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 6 || !rest.get(digits..)?.starts_with("}}") {
        return None;
    }
    let n: usize = rest.get(..digits)?.parse().ok()?;
    let slot = match kind {
        "CODE" => Slot::Code(n),
        "FILE" => Slot::File(n),
        "CHART" => Slot::Chart(n),
        _ => return None,
    };
    Some((slot, 2 + kind.len() + 1 + digits + 2))
}

/// `text` with each marker `with` has something for replaced by it.
pub(crate) fn replace_slots(text: &str, with: &mut dyn FnMut(Slot) -> Option<String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        out.push_str(rest.get(..at).unwrap_or_default());
        let tail = rest.get(at..).unwrap_or_default();
        match slot_at(tail).and_then(|(slot, len)| Some((with(slot)?, len))) {
            Some((replacement, len)) => {
                out.push_str(&replacement);
                rest = tail.get(len..).unwrap_or_default();
            }
            None => {
                out.push_str("{{");
                rest = tail.get(2..).unwrap_or_default();
            }
        }
    }
    out.push_str(rest);
    out
}

/// Where the tag starting at `start` of ammonia's output ends (after its `>`): ammonia quotes
/// every attribute value with `"` and escapes `"` inside one, so a `>` inside quotes is text.
fn tag_end(html: &str, start: usize) -> usize {
    let mut quoted = false;
    for (i, c) in html.get(start..).unwrap_or_default().char_indices() {
        match c {
            '"' => quoted = !quoted,
            '>' if !quoted => return start + i + 1,
            _ => {}
        }
    }
    html.len()
}

/// Markers in `html` (ammonia's output, where every `<` that is not text starts a tag) filled in:
/// in text by `block` (a marker alone in its paragraph takes the paragraph's place), inside a
/// tag by `plain`, escaped text that keeps the tag whole.
pub(crate) fn fill(
    html: &str,
    block: &mut dyn FnMut(Slot) -> Option<String>,
    plain: &mut dyn FnMut(Slot) -> Option<String>,
) -> String {
    let mut out = String::with_capacity(html.len());
    let mut i = 0;
    while i < html.len() {
        let rest = html.get(i..).unwrap_or_default();
        if rest.starts_with('<') {
            let end = tag_end(html, i);
            out.push_str(&replace_slots(html.get(i..end).unwrap_or_default(), plain));
            i = end;
            continue;
        }
        let end = rest.find('<').map_or(html.len(), |k| i + k);
        let text = html.get(i..end).unwrap_or_default();
        let alone = slot_at(text).filter(|(_, len)| *len == text.len());
        if let Some((slot, _)) = alone
            && out.ends_with("<p>")
            && html.get(end..).unwrap_or_default().starts_with("</p>")
            && let Some(replacement) = block(slot)
        {
            out.truncate(out.len() - "<p>".len());
            out.push_str(&replacement);
            i = end + "</p>".len();
            continue;
        }
        out.push_str(&replace_slots(text, block));
        i = end;
    }
    out
}

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

/// `text` as literal Markdown: what could start or close a construct escaped, `<` and `&` as
/// entities; each line's leading blanks dropped (four would make it code).
pub(crate) fn md_text(text: &str) -> String {
    md_escape(text, true)
}

/// [`md_text`] for text that may stand in the middle of a line (`line_start` false): its first
/// line is kept as it begins.
fn md_escape(text: &str, line_start: bool) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for (n, line) in text.split('\n').enumerate() {
        let start = n > 0 || line_start;
        if n > 0 {
            out.push('\n');
        }
        let line = if start { line.trim_start() } else { line };
        let lead_digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        for (i, c) in line.char_indices() {
            match c {
                '<' => out.push_str("&lt;"),
                '&' => out.push_str("&amp;"),
                '\\' | '`' | '*' | '_' | '[' | ']' | '>' | '!' | '|' | '~' | '#' | '{' | '}' => {
                    out.push('\\');
                    out.push(c);
                }
                '-' | '+' | '=' if start && i == 0 => {
                    out.push('\\');
                    out.push(c);
                }
                '.' | ')' if start && lead_digits > 0 && i == lead_digits => {
                    out.push('\\');
                    out.push(c);
                }
                '\r' => {}
                _ => out.push(c),
            }
        }
    }
    out
}

/// A code fence longer than any run of backticks in `code`.
pub(crate) fn fence(code: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in code.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    "`".repeat(longest.max(2) + 1)
}

/// A code language fit for a fence's info string: its first word, without what would end the
/// fence (a backtick) or mean something else.
pub(crate) fn info_string(language: &str) -> String {
    language
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '.' | '#'))
        .take(32)
        .collect()
}

/// Inline tags kept as they are in Markdown: formatting with no attribute.
const PLAIN_TAGS: [&str; 16] = [
    "b", "i", "em", "strong", "u", "s", "sub", "sup", "code", "kbd", "mark", "small", "del", "ins",
    "br", "wbr",
];

fn plain_tag(tag: &str) -> bool {
    let Some(inner) = tag.strip_prefix('<').and_then(|t| t.strip_suffix('>')) else {
        return false;
    };
    let inner = inner.strip_prefix('/').unwrap_or(inner);
    let inner = inner
        .trim_end()
        .strip_suffix('/')
        .unwrap_or(inner)
        .trim_end();
    PLAIN_TAGS.iter().any(|t| t.eq_ignore_ascii_case(inner))
}

fn scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once(':')?;
    let ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    ok.then(|| scheme.to_ascii_lowercase())
}

fn safe_link(url: &str, kind: LinkType, allowed: &Allowed) -> bool {
    kind == LinkType::Email
        || allowed.contains(url)
        || (url.starts_with('#') && !url.contains(':'))
        || matches!(scheme(url).as_deref(), Some("http" | "https" | "mailto"))
}

/// An HTML block's lines with no blank one (a blank line would end the block and let what
/// follows be read as Markdown).
pub(crate) fn without_blank_lines(html: &str) -> String {
    html.split('\n')
        .map(|line| {
            if line.trim().is_empty() {
                "&#32;"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A top-level HTML block of Markdown, cleaned, in one `<div>` so it stays one block.
fn html_block(source: &str, allowed: &Allowed) -> String {
    let clean = without_blank_lines(clean_html(source, allowed).trim());
    if clean
        .split('\n')
        .all(|line| line == "&#32;" || line.trim().is_empty())
    {
        String::new()
    } else if clean.starts_with("<div>") && clean.ends_with("</div>") {
        format!("{clean}\n")
    } else {
        format!("<div>\n{clean}\n</div>\n")
    }
}

/// Markdown made safe for any viewer: rewritten pass after pass until nothing changes (each
/// pass fixes what the one before let through); given up on, it is shown as code.
pub(crate) fn markdown(md: &str, allowed: &Allowed) -> String {
    let mut text = md.to_owned();
    for _ in 0..MAX_PASSES {
        let next = pass(&text, allowed);
        if next == text {
            return text;
        }
        text = next;
    }
    let f = fence(md);
    format!("{f}text\n{}\n{f}\n", md.trim_end())
}

/// `md` with each reference that stands inside a tag of its raw HTML (an attribute's value)
/// replaced by `plain` — so that what fills in references in text cannot split a tag.
pub(crate) fn plain_in_tags(md: &str, plain: &mut dyn FnMut(Slot) -> Option<String>) -> String {
    let mut edits = Vec::new();
    for (event, range) in Parser::new_ext(md, MARKDOWN).into_offset_iter() {
        let source = md.get(range.clone()).unwrap_or_default();
        if !source.contains("{{") {
            continue;
        }
        match event {
            Event::InlineHtml(_) => edits.push((range, replace_slots(source, plain))),
            Event::Start(Tag::HtmlBlock) => edits.push((range, in_tags(source, plain))),
            _ => {}
        }
    }
    apply(md, edits)
}

/// Raw HTML with the references inside its tags (quotes of either kind followed) replaced.
fn in_tags(html: &str, plain: &mut dyn FnMut(Slot) -> Option<String>) -> String {
    let mut out = String::with_capacity(html.len());
    let (mut tag, mut quote) = (false, None);
    let mut i = 0;
    while let Some(c) = html.get(i..).and_then(|r| r.chars().next()) {
        if tag
            && c == '{'
            && let Some((slot, len)) = slot_at(html.get(i..).unwrap_or_default())
            && let Some(text) = plain(slot)
        {
            out.push_str(&text);
            i += len;
            continue;
        }
        match (tag, quote) {
            (true, Some(q)) if c == q => quote = None,
            (true, None) if c == '"' || c == '\'' => quote = Some(c),
            (true, None) if c == '>' => tag = false,
            (false, _) if c == '<' => tag = true,
            _ => {}
        }
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The text of the events of `events`, what a link or an image says.
fn inner_text(events: &[(Event<'_>, Range<usize>)]) -> String {
    let mut out = String::new();
    for (event, _) in events {
        match event {
            Event::Text(t) | Event::Code(t) => out.push_str(t),
            Event::SoftBreak | Event::HardBreak => out.push(' '),
            _ => {}
        }
    }
    out
}

/// Index of the event that closes the one at `start` (same depth).
fn closing(events: &[(Event<'_>, Range<usize>)], start: usize) -> usize {
    let mut depth = 0usize;
    for (i, (event, _)) in events.iter().enumerate().skip(start) {
        match event {
            Event::Start(_) => depth += 1,
            Event::End(_) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    events.len().saturating_sub(1)
}

/// One rewrite of `md`: raw HTML cleaned (a top-level block) or escaped (inline, or inside a
/// quote or list), links and images that lead outside the report made text, text a viewer
/// might read as a tag escaped.
fn pass(md: &str, allowed: &Allowed) -> String {
    let events: Vec<(Event<'_>, Range<usize>)> =
        Parser::new_ext(md, MARKDOWN).into_offset_iter().collect();
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut containers = 0usize;
    let mut code = 0usize;
    let mut i = 0;
    while let Some((event, range)) = events.get(i) {
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::List(_) | Tag::Item) => containers += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::List(_) | TagEnd::Item) => {
                containers = containers.saturating_sub(1);
            }
            Event::Start(Tag::CodeBlock(_)) => code += 1,
            Event::End(TagEnd::CodeBlock) => code = code.saturating_sub(1),
            Event::Start(Tag::HtmlBlock) if containers == 0 => {
                let end = closing(&events, i);
                let source = md.get(range.clone()).unwrap_or_default();
                let mut clean = html_block(source, allowed);
                let after = md.get(range.end..).unwrap_or_default();
                if !clean.is_empty() && !after.is_empty() && !after.starts_with('\n') {
                    clean.push('\n');
                }
                edits.push((range.clone(), clean));
                i = end + 1;
                continue;
            }
            Event::Html(html) | Event::InlineHtml(html) if !plain_tag(html.trim_end()) => {
                let source = md.get(range.clone()).unwrap_or_default();
                let escaped = source.replace('&', "&amp;").replace('<', "&lt;");
                edits.push((range.clone(), escaped));
            }
            Event::Text(text) if code == 0 && text.contains('<') => {
                let line_start = md
                    .get(..range.start)
                    .is_none_or(|b| b.is_empty() || b.ends_with('\n'));
                edits.push((range.clone(), md_escape(text, line_start)));
            }
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            }) if !safe_link(dest_url, *link_type, allowed) => {
                let end = closing(&events, i);
                let text = inner_text(events.get(i + 1..end).unwrap_or_default());
                edits.push((range.clone(), md_text(&text.replace('\n', " "))));
                i = end + 1;
                continue;
            }
            Event::Start(Tag::Image { dest_url, .. }) if !allowed.contains(dest_url) => {
                let end = closing(&events, i);
                let alt = md_text(&inner_text(events.get(i + 1..end).unwrap_or_default()));
                let remote = matches!(scheme(dest_url).as_deref(), Some("http" | "https"))
                    && !dest_url.contains(['<', '>', '\n', '\\']);
                // A remote image becomes a link to it: nothing is fetched when the report opens.
                let text = if remote {
                    format!(
                        "[{}](<{dest_url}>)",
                        if alt.is_empty() { "image" } else { &alt }
                    )
                } else {
                    alt
                };
                edits.push((range.clone(), text));
                i = end + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    apply(md, edits)
}

fn apply(md: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(md.len());
    let mut at = 0;
    for (range, with) in edits {
        if range.start < at {
            continue;
        }
        out.push_str(md.get(at..range.start).unwrap_or_default());
        out.push_str(&with);
        at = range.end;
    }
    out.push_str(md.get(at..).unwrap_or_default());
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every tag of `html` with its attributes: `(name, [(attribute, value)])`, read the way
    /// a browser tokenises (quoted and unquoted values).
    pub(crate) fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
        let mut out = Vec::new();
        let bytes: Vec<char> = html.chars().collect();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != '<' {
                i += 1;
                continue;
            }
            i += 1;
            let closing = bytes.get(i) == Some(&'/');
            if closing {
                i += 1;
            }
            let mut name = String::new();
            while i < bytes.len() && !bytes[i].is_whitespace() && bytes[i] != '>' && bytes[i] != '/'
            {
                name.push(bytes[i].to_ascii_lowercase());
                i += 1;
            }
            if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
                continue;
            }
            let mut attributes = Vec::new();
            loop {
                while i < bytes.len() && (bytes[i].is_whitespace() || bytes[i] == '/') {
                    i += 1;
                }
                if i >= bytes.len() || bytes[i] == '>' {
                    i += 1;
                    break;
                }
                let mut attribute = String::new();
                while i < bytes.len()
                    && !bytes[i].is_whitespace()
                    && !matches!(bytes[i], '=' | '>' | '/')
                {
                    attribute.push(bytes[i].to_ascii_lowercase());
                    i += 1;
                }
                while i < bytes.len() && bytes[i].is_whitespace() {
                    i += 1;
                }
                let mut value = String::new();
                if bytes.get(i) == Some(&'=') {
                    i += 1;
                    while i < bytes.len() && bytes[i].is_whitespace() {
                        i += 1;
                    }
                    match bytes.get(i) {
                        Some(&q) if q == '"' || q == '\'' => {
                            i += 1;
                            while i < bytes.len() && bytes[i] != q {
                                value.push(bytes[i]);
                                i += 1;
                            }
                            i += 1;
                        }
                        _ => {
                            while i < bytes.len() && !bytes[i].is_whitespace() && bytes[i] != '>' {
                                value.push(bytes[i]);
                                i += 1;
                            }
                        }
                    }
                }
                if attribute.is_empty() {
                    i += 1;
                } else {
                    attributes.push((attribute, value));
                }
            }
            if !closing {
                out.push((name, attributes));
            }
        }
        out
    }

    /// What in `html` would run, fetch, submit or lead outside the report when opened.
    pub(crate) fn dangers(html: &str, data_images: bool) -> Vec<String> {
        let mut found = Vec::new();
        for (tag, attributes) in tags(html) {
            if matches!(
                tag.as_str(),
                "script"
                    | "style"
                    | "iframe"
                    | "frame"
                    | "object"
                    | "embed"
                    | "meta"
                    | "form"
                    | "input"
                    | "button"
                    | "textarea"
                    | "link"
                    | "base"
                    | "svg"
                    | "math"
            ) {
                found.push(format!("<{tag}>"));
            }
            for (attribute, value) in attributes {
                let v = value.trim().to_ascii_lowercase();
                if attribute.starts_with("on") || attribute == "style" || attribute == "srcset" {
                    found.push(format!("{tag} {attribute}"));
                }
                if matches!(attribute.as_str(), "href" | "src" | "action" | "formaction") {
                    let ours = v.starts_with("files/")
                        || v.starts_with('#')
                        || v.starts_with("http://")
                        || v.starts_with("https://")
                        || v.starts_with("mailto:")
                        || (data_images && tag == "img" && v.starts_with("data:image/"));
                    let remote_image = tag == "img" && v.starts_with("http");
                    if !ours || remote_image {
                        found.push(format!("{tag} {attribute}={value}"));
                    }
                }
            }
        }
        found
    }

    /// `md` as a Markdown viewer shows it (raw HTML passed through).
    pub(crate) fn viewer(md: &str) -> String {
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, Parser::new_ext(md, MARKDOWN));
        html
    }

    fn allowed() -> Allowed {
        Allowed::new(["files/sales.csv".to_owned(), "files/chart.png".to_owned()])
    }

    #[test]
    fn references_fill_text_and_stay_text_inside_tags() {
        let html = "<p>{{CODE:0}}</p><p>see {{FILE:0}}</p><span title=\"{{CODE:0}} &quot;>{{FILE:0}}\">x</span>{{NOPE:1}}{{FILE:9}}";
        let filled = fill(
            html,
            &mut |s| match s {
                Slot::Code(0) => Some("<figure>code</figure>".into()),
                Slot::File(0) => Some("<a href=\"files/sales.csv\">sales.csv</a>".into()),
                _ => None,
            },
            &mut |s| match s {
                Slot::Code(0) => Some("Sums".into()),
                Slot::File(0) => Some("sales.csv".into()),
                _ => None,
            },
        );
        assert_eq!(
            filled,
            "<figure>code</figure><p>see <a href=\"files/sales.csv\">sales.csv</a></p>\
             <span title=\"Sums &quot;>sales.csv\">x</span>{{NOPE:1}}{{FILE:9}}"
        );
    }

    #[test]
    fn html_keeps_only_the_reports_own_links_and_images() {
        let clean = clean_html(
            "<a href=\"files/sales.csv\">ok</a><a href=\"files/other.csv\">no</a>\
             <a href=\"/api/v1/conversations/x/files/upload_001\">server</a>\
             <img src=\"files/chart.png\"><img src=\"https://tracker.example/p.gif\">\
             <img src=\"data:image/png;base64,AAAA\"><a href=\"#top\">top</a>",
            &allowed(),
        );
        assert_eq!(
            clean,
            "<a href=\"files/sales.csv\" rel=\"noopener noreferrer nofollow\">ok</a>\
             <a rel=\"noopener noreferrer nofollow\">no</a>\
             <a rel=\"noopener noreferrer nofollow\">server</a>\
             <img src=\"files/chart.png\"><img><img>\
             <a href=\"#top\" rel=\"noopener noreferrer nofollow\">top</a>"
        );
    }

    #[test]
    fn markdown_loses_what_a_viewer_would_run() {
        let md = "# Report\n\n<img src=x onerror=alert(1)>\n\n[click](javascript:alert(1)) \
                  <a href=\"javascript:alert(2)\">two</a> <b>bold</b>\n\n\
                  <meta http-equiv=\"refresh\" content=\"0;url=https://evil.example\">\n\
                  <form action=\"https://evil.example\"><input name=\"q\"></form>\n\n\
                  ![t](https://tracker.example/p.gif) ![c](files/chart.png) [s](files/sales.csv)\n\n\
                  > <script>alert(3)</script>\n\n<textarea>\n\n[x](javascript:alert(4))\n\n</textarea>\n";
        let safe = markdown(md, &allowed());
        assert_eq!(
            dangers(&viewer(&safe), false),
            Vec::<String>::new(),
            "{safe}"
        );
        assert!(safe.contains("<b>bold</b>"), "{safe}");
        assert!(
            safe.contains("![c](files/chart.png) [s](files/sales.csv)"),
            "{safe}"
        );
        assert!(
            safe.contains("[t](<https://tracker.example/p.gif>)"),
            "{safe}"
        );
        assert_eq!(markdown(&safe, &allowed()), safe, "not a fixed point");
    }

    #[test]
    fn md_text_is_read_back_as_the_same_text() {
        let text = "# 1. *West* <b>&amp;</b> [x](y) `z` | ~a~ \\ _b_\n- item\n+ two\n    code?";
        let html = viewer(&md_text(text));
        assert_eq!(
            html,
            "<p># 1. *West* &lt;b&gt;&amp;amp;&lt;/b&gt; [x](y) `z` | ~a~ \\ _b_\n- item\n+ two\ncode?</p>\n"
        );
    }

    pub(crate) fn hostile() -> impl Strategy<Value = String> {
        let pieces = prop_oneof![
            Just("<script>alert(1)</script>"),
            Just("<img src=x onerror=alert(1)>"),
            Just("<IMG SRC=\"jav&#x09;ascript:alert(1)\">"),
            Just("[a](javascript:alert(1))"),
            Just("[a](JaVaScRiPt:alert(1) \"t\")"),
            Just("<javascript:alert(1)>"),
            Just("[r]: javascript:alert(1)\n\n[r]"),
            Just("![i](data:text/html;base64,PHNjcmlwdD4=)"),
            Just("<meta http-equiv=refresh content=0;url=https://e.example>"),
            Just("<form action=https://e.example><input></form>"),
            Just("<iframe src=https://e.example></iframe>"),
            Just("<style>body{display:none}</style>"),
            Just("<div onclick=\"x()\">"),
            Just("</div>"),
            Just("<textarea>"),
            Just("<pre>"),
            Just("<!--"),
            Just("-->"),
            Just("<a href=\"{{FILE:0}}\">"),
            Just("\n\n"),
            Just("\n"),
            Just("> "),
            Just("- "),
            Just("    "),
            Just("```"),
            Just("`"),
            Just("<"),
            Just(">"),
            Just("&lt;script&gt;"),
            Just("\\"),
            Just("text "),
            Just("[s](files/sales.csv)"),
            Just("| a | b |\n|---|---|\n| <img src=x onerror=y> | c |"),
        ];
        proptest::collection::vec(pieces, 0..24).prop_map(|p| p.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn no_markdown_runs_or_leaves_the_report(md in hostile()) {
            let safe = markdown(&md, &allowed());
            let html = viewer(&safe);
            prop_assert_eq!(dangers(&html, false), Vec::<String>::new(), "{}\n---\n{}", safe, html);
        }

        #[test]
        fn no_cleaned_html_runs_or_leaves_the_report(html in hostile()) {
            let clean = clean_html(&html, &allowed());
            prop_assert_eq!(dangers(&clean, false), Vec::<String>::new(), "{}", clean);
        }
    }
}
