//! Model output made safe for the page: a Markdown report is rendered to HTML with
//! pulldown-cmark and sanitised with ammonia (no script, no event handler, no style, links
//! that open nothing with the page's rights), so the page can insert it as it is. An HTML
//! report (`content_type` html) is not rendered here: the page shows it in a sandboxed frame.
//! `{{CODE:N}}` and `{{FILE:N}}` placeholders survive as text for the page to replace.

use serde_json::{Map, Value};

/// `text` (Markdown, possibly with raw HTML) as sanitised HTML.
pub(crate) fn markdown_html(text: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut raw = String::with_capacity(text.len() * 3 / 2);
    html::push_html(&mut raw, Parser::new_ext(text, options));
    ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&raw)
        .to_string()
}

/// The sanitised HTML of a processed answer whose report is Markdown; `None`
/// for an HTML report or an empty one.
pub(crate) fn response_html(api_response: &Value) -> Option<String> {
    let text = api_response.get("response")?.as_str()?;
    let html = api_response
        .pointer("/metadata/content_type")
        .and_then(Value::as_str)
        == Some("html");
    (!html && !text.trim().is_empty()).then(|| markdown_html(text))
}

/// Adds `response_html` beside an `api_response` (or `response`) in an event's data.
pub(crate) fn decorate(map: &mut Map<String, Value>, key: &str) {
    if let Some(html) = map.get(key).and_then(response_html) {
        map.insert("response_html".into(), Value::String(html));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markdown_is_rendered_and_scripts_go() {
        let html = markdown_html(
            "**West** beat it\n\n| a | b |\n|---|--:|\n| 1 | 2 |\n\n<script>alert(1)</script>\
             <img src=x onerror=alert(1)> [x](javascript:alert(1)) {{CODE:0}}",
        );
        assert!(html.contains("<strong>West</strong>"));
        assert!(html.contains("<table>"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("onerror"));
        assert!(!html.contains("href=\"javascript:"), "{html}");
        assert!(html.contains("{{CODE:0}}"));
    }

    #[test]
    fn html_reports_are_left_to_the_sandbox() {
        let md = json!({"response": "*hi*", "metadata": {"content_type": "markdown"}});
        let html = json!({"response": "<div></div>", "metadata": {"content_type": "html"}});
        assert_eq!(response_html(&md).as_deref(), Some("<p><em>hi</em></p>\n"));
        assert_eq!(response_html(&html), None);
    }
}
