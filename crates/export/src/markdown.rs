//! The report as Markdown, for a folder or a zip with its files beside it: code in fenced
//! blocks, images and files linked relatively (`files/…`), an HTML report kept as cleaned HTML
//! with its charts as SVG files; the whole made safe for any viewer.

use std::fmt::Write as _;

use super::Parts;
use super::html::{file_link, mark_charts, plain, size};
use super::sanitise::{
    self, Slot, clean_html, escape, fence, fill, info_string, md_text, plain_in_tags,
    replace_slots, without_blank_lines,
};

/// The report as Markdown.
pub(crate) fn document(p: &Parts) -> String {
    let mut out = String::new();
    let w = p.language.words();
    let _ = writeln!(out, "# {}\n", md_text(&p.title.replace('\n', " ")));
    let _ = writeln!(out, "*{} {}*\n", w.answered, md_text(&p.answered()));
    let q = &p.question;
    if !q.words.is_empty() || !q.attached.is_empty() {
        let _ = writeln!(out, "> **{}**\n>", w.question);
        for line in md_text(&q.words).lines() {
            let _ = writeln!(out, "> {line}");
        }
        if !q.attached.is_empty() {
            let _ = writeln!(
                out,
                ">\n> {}{}{}",
                w.attached,
                w.colon,
                md_text(&q.attached.join(", "))
            );
        }
        out.push('\n');
    }
    let body = if p.is_html() {
        html_body(p)
    } else {
        markdown_body(p)
    };
    out.push_str(body.trim_end());
    out.push('\n');
    if !p.linked.is_empty() {
        let _ = write!(out, "\n## {}\n\n", w.files);
        for l in &p.linked {
            let _ = writeln!(
                out,
                "- [{}]({}) ({})",
                md_text(&l.name),
                l.place.href,
                size(l.size, w)
            );
        }
    }
    sanitise::markdown(&out, &p.allowed())
}

/// A Markdown report with its code as fenced blocks (each in a paragraph of its own) and its
/// files as relative links, filled in before the whole is made safe.
fn markdown_body(p: &Parts) -> String {
    let mut text = plain_in_tags(&p.answer.response, &mut |slot| plain(p, slot));
    for c in &p.codes {
        let f = fence(&c.code);
        let caption = if c.description.is_empty() {
            String::new()
        } else {
            format!("\n\n*{}*", md_text(&c.description))
        };
        let block = format!(
            "{f}{}\n{}\n{f}{caption}",
            info_string(&c.language),
            c.code.trim_end_matches('\n')
        );
        text = own_paragraph(&text, &Slot::Code(c.index).marker(), &block);
    }
    replace_slots(&text, &mut |slot| match slot {
        Slot::File(n) => {
            let f = p.file(n)?;
            let Some(place) = &f.place else {
                return Some(format!("*{}*", p.language.words().gone));
            };
            let bang = if f.media_type.starts_with("image/") {
                "!"
            } else {
                ""
            };
            Some(format!("{bang}[{}]({})", md_text(&f.name), place.href))
        }
        Slot::Code(_) | Slot::Chart(_) => None,
    })
}

/// An HTML report cleaned, its charts and images as files beside it, in one HTML block.
fn html_body(p: &Parts) -> String {
    let clean = clean_html(&mark_charts(p), &p.allowed());
    let filled = fill(
        &clean,
        &mut |slot| {
            Some(match slot {
                Slot::Code(n) => {
                    let c = p.code(n)?;
                    let caption = if c.description.is_empty() {
                        escape(&c.language)
                    } else {
                        escape(&c.description)
                    };
                    format!(
                        "<p><em>{caption}</em></p><pre><code>{}</code></pre>",
                        escape(&c.code)
                    )
                }
                Slot::File(n) => {
                    let f = p.file(n)?;
                    let Some(place) = &f.place else {
                        return Some(format!("<em>{}</em>", p.language.words().gone));
                    };
                    if f.media_type.starts_with("image/") {
                        format!(
                            "<img src=\"{}\" alt=\"{}\">",
                            escape(&place.href),
                            escape(&f.name)
                        )
                    } else {
                        file_link(&place.href, &f.name)
                    }
                }
                Slot::Chart(k) => {
                    let c = p.charts.get(k)?;
                    format!(
                        "<p><img src=\"{}\" alt=\"{}\"></p>",
                        escape(&c.place.href),
                        escape(c.title.as_deref().unwrap_or(p.language.words().chart))
                    )
                }
            })
        },
        &mut |slot| plain(p, slot),
    );
    format!("<div>\n{}\n</div>\n", without_blank_lines(filled.trim()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_blocks_stand_in_their_own_paragraph() {
        assert_eq!(
            own_paragraph("see\n\n{{CODE:0}}\n\n\nnext {{CODE:0}}", "{{CODE:0}}", "B"),
            "see\n\nB\n\nnext\n\nB"
        );
    }

    #[test]
    fn fences_outgrow_the_code_and_languages_cannot_end_them() {
        assert_eq!(fence("print(1)"), "```");
        assert_eq!(fence("a ```` b"), "`````");
        assert_eq!(info_string("py`thon {x}"), "python");
    }
}
