use super::*;

#[test]
fn formats_and_slugs() {
    assert_eq!(
        "md".parse::<ReportFormat>().ok(),
        Some(ReportFormat::Markdown)
    );
    assert_eq!(
        "HTML".parse::<ReportFormat>().ok(),
        Some(ReportFormat::Html)
    );
    let err = "pdf".parse::<ReportFormat>().err().map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("unknown report format \"pdf\": use md or html")
    );
    assert_eq!(
        "zip".parse::<ExportFormat>().ok(),
        Some(ExportFormat::HtmlZip)
    );
    assert_eq!(
        "md".parse::<ExportFormat>().ok(),
        Some(ExportFormat::MarkdownZip)
    );
    assert_eq!(
        "html".parse::<ExportFormat>().ok(),
        Some(ExportFormat::Html)
    );
    assert_eq!(slug("West's Q3 — by product?"), "west-s-q3-by-product");
    assert_eq!(slug("…"), "answer");
}

#[test]
fn long_code_is_cut_and_says_so() {
    let code = cut("x".repeat(MAX_CODE_CHARS + 10));
    assert!(
        code.ends_with("(cut at 200000 characters)"),
        "{}",
        &code[code.len() - 40..]
    );
}

use names::Names;
use sanitise::tests::{dangers, hostile, viewer};

/// A Markdown answer that tries everything: scripts, handlers, `javascript:` links, a redirect,
/// a form, a frame, a remote image, references inside attributes.
const HOSTILE_MD: &str = "## Findings\n\n\
West beat its target: {{FILE:0}} holds the figures.\n\n\
{{FILE:1}}\n\n\
<img src=x onerror=alert(1)> <b>bold</b> [click](javascript:alert(1)) ![t](https://tracker.example/p.gif)\n\n\
<meta http-equiv=\"refresh\" content=\"0;url=https://evil.example\">\n\
<form action=\"https://evil.example\"><input name=\"q\"></form>\n\n\
<iframe src=\"https://evil.example\"></iframe><style>body{display:none}</style>\n\n\
Hover <span title=\"{{CODE:0}}\">here</span> or <a href=\"{{FILE:0}}\">there</a>.\n\n\
{{CODE:0}}\n\n\
| Region | Note |\n|---|---|\n| West | <img src=x onerror=alert(2)> |\n";

/// The same as an HTML report.
const HOSTILE_HTML: &str = "<h2>Findings</h2><p>See {{FILE:0}}.</p>\
<div title=\"{{CODE:0}}\" onclick=\"alert(1)\">x</div>{{FILE:1}}\n\
<script>alert(1)</script><form action=\"https://evil.example\"><input></form>\n\
<p>{{CODE:0}}</p><a href=\"javascript:alert(1)\">j</a><img src=\"https://tracker.example/p.gif\">\n\
<textarea>\n\n[x](javascript:alert(4))\n\n</textarea>\n";

fn answer(response: &str, html: bool) -> ApiResponse {
    let content_type = if html { "html" } else { "markdown" };
    serde_json::from_value(serde_json::json!({
        "response": response,
        "metadata": {"action_type": "complete", "status": "complete", "content_type": content_type}
    }))
    .unwrap()
}

/// A report with a CSV and an image beside it and a code block — hostile names and text
/// everywhere a person or the model chose them.
fn parts(response: &str, html: bool) -> Parts {
    let mut names = Names::default();
    let csv = names.stored("upload_001", "targets.csv");
    let png = names.stored("output_001", "chart <1>.png");
    Parts {
        title: "Targets <b>by</b> region".into(),
        untitled: false,
        language: crate::Language::English,
        question: Question {
            words: "Check targets.csv — <script>x</script>?\n# not a heading\n1. not a list".into(),
            attached: vec!["targets.csv".into()],
        },
        answered_at: "2025-11-27T15:41:02.123Z".into(),
        seq: 12,
        answer: answer(response, html),
        codes: vec![CodePart {
            index: 0,
            language: "python".into(),
            description: "Sums the *targets* \"quoted\"".into(),
            code: "print('<b>&</b>')\n```\n".into(),
        }],
        files: vec![
            FilePart {
                index: 0,
                name: "targets.csv".into(),
                place: Some(csv.clone()),
                media_type: "text/csv".into(),
                image: None,
            },
            FilePart {
                index: 1,
                name: "chart <1>.png".into(),
                place: Some(png.clone()),
                media_type: "image/png".into(),
                image: Some(Arc::from(&b"\x89PNG"[..])),
            },
        ],
        linked: vec![
            Linked {
                id: "upload_001".into(),
                name: "targets.csv".into(),
                place: csv,
                size: 38,
                media_type: "text/csv".into(),
            },
            Linked {
                id: "output_001".into(),
                name: "chart <1>.png".into(),
                place: png,
                size: 4,
                media_type: "image/png".into(),
            },
        ],
        charts: Vec::new(),
    }
}

/// The document from `<body>` on (the stylesheet is the same in every one).
fn body_of(html: &str) -> &str {
    html.split_once("<body>").map_or(html, |(_, b)| b)
}

#[test]
fn a_hostile_markdown_answer_renders_safely() {
    let p = parts(HOSTILE_MD, false);
    let md = markdown::document(&p);
    assert_eq!(dangers(&viewer(&md), false), Vec::<String>::new(), "{md}");
    insta::assert_snapshot!("hostile_markdown_as_markdown", md);
    let html = html::document(&p, Packaging::Alone);
    assert_eq!(
        dangers(body_of(&html), true),
        Vec::<String>::new(),
        "{html}"
    );
    insta::assert_snapshot!("hostile_markdown_as_html", body_of(&html));
}

#[test]
fn a_hostile_html_answer_renders_safely() {
    let p = parts(HOSTILE_HTML, true);
    let md = markdown::document(&p);
    assert_eq!(dangers(&viewer(&md), false), Vec::<String>::new(), "{md}");
    insta::assert_snapshot!("hostile_html_as_markdown", md);
    let html = html::document(&p, Packaging::WithFiles);
    assert_eq!(
        dangers(body_of(&html), true),
        Vec::<String>::new(),
        "{html}"
    );
    insta::assert_snapshot!("hostile_html_as_html", body_of(&html));
}

#[test]
fn the_question_is_the_persons_words() {
    let note = "\n\nUploaded files (read one with file_reader {\"path\": \"<id>\"}; run_python finds \
                them in its working folder under their names):\n\
                - <file_ref>upload_001</file_ref> sales.csv (text/csv, 12 bytes)\n\
                - <file_ref>upload_002</file_ref> gbk.csv (text/csv, 9 bytes) — 2024";
    let words = "Compare <file_ref>upload_001</file_ref> with last year.";
    let entry = |content: ba_protocol::Content| {
        let mut e = ba_protocol::LogEntry::new("e1", LogRole::User, "2025-11-27T15:41:02Z");
        e.content = Some(content);
        e
    };
    let one_block = entry(ba_protocol::Content::Text(format!("{words}{note}")));
    let two_blocks = entry(ba_protocol::Content::Blocks(vec![
        ba_protocol::ContentBlock::text(words),
        ba_protocol::ContentBlock::text(note.trim_start()),
    ]));
    for entry in [one_block, two_blocks] {
        let (said, attached) = person_words(&entry);
        assert_eq!(said, words);
        assert_eq!(attached, ["upload_001", "upload_002"]);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    #[test]
    fn no_exported_answer_runs_or_leaves_the_report(text in hostile(), html in proptest::bool::ANY) {
        let p = parts(&format!("{text}{{{{FILE:0}}}}{{{{CODE:0}}}}{text}"), html);
        let md = markdown::document(&p);
        proptest::prop_assert_eq!(dangers(&viewer(&md), false), Vec::<String>::new(), "{}", md);
        let doc = html::document(&p, Packaging::Alone);
        let body = body_of(&doc);
        proptest::prop_assert_eq!(dangers(body, true), Vec::<String>::new(), "{}", body);
    }
}

#[test]
fn a_language_tag_names_chinese_or_english() {
    for tag in ["zh", "zh-CN", "zh-Hans-CN", "ZH_cn", " zh-TW "] {
        assert_eq!(
            crate::Language::from_tag(tag),
            crate::Language::SimplifiedChinese,
            "{tag}"
        );
    }
    for tag in ["en", "en-US", "", "fr", "zhx", "<script>"] {
        assert_eq!(
            crate::Language::from_tag(tag),
            crate::Language::English,
            "{tag}"
        );
    }
    let mut p = parts("An answer.", false);
    p.language = crate::Language::SimplifiedChinese;
    let doc = crate::html::document(&p, crate::Packaging::Alone);
    assert!(
        doc.starts_with("<!doctype html>\n<html lang=\"zh-CN\">"),
        "{doc}"
    );
    let md = crate::markdown::document(&p);
    assert!(
        md.contains("*回答于 2025-11-27 15:41 UTC*") && md.contains("> 附件：targets.csv"),
        "{md}"
    );
}
