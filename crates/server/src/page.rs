//! The analyst's page, embedded in the binary: `GET /` (the HTML, with a fresh CSP nonce),
//! `/page/app.js` and `/page/style.css` (our own code, no build step), `/page/i18n.js` (the
//! catalogues of the page's words, English and Simplified Chinese, an asset of their own so
//! that a language more does not weigh on the page's budget), and
//! `/assets/echarts.min.js` when `cargo xtask assets` has fetched it. None of these needs the
//! token: the page reads it from the URL fragment (`#token=…`, never sent to the server), takes
//! it out of the address bar at once (the tab keeps it in `sessionStorage`) and sends it as
//! `Authorization: Bearer` on its `fetch` calls, the event stream included (read with `fetch`
//! and a `ReadableStream`, so the token never appears in a URL or a log).
//!
//! The page's Content-Security-Policy allows its own files and scripts carrying the response's
//! nonce. A report in HTML runs in an `<iframe sandbox="allow-scripts" srcdoc>` (an opaque
//! origin: no access to the page, its storage or its token); the frame inherits this policy and
//! adds its own stricter one (no `connect-src`), and the page gives the nonce only to the
//! report's inline scripts and to ECharts. Inline event handlers (`onclick="…"`) are attribute
//! code, which a nonce policy refuses unless it says `'unsafe-hashes'` for the page as well; so
//! the page turns each into a listener that a nonce-carrying script adds in the frame — the
//! same code with the same (sandboxed) rights as the report's scripts.

use std::path::PathBuf;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rand::RngCore as _;
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// The page's HTML; `__NONCE__` is replaced per response.
pub(crate) const INDEX_HTML: &str = include_str!("../page/index.html");
/// The page's script.
pub(crate) const APP_JS: &str = include_str!("../page/app.js");
/// The page's style sheet.
pub(crate) const STYLE_CSS: &str = include_str!("../page/style.css");

/// The page's words in English, key by key (`page/i18n/en.json`).
#[cfg(test)]
const CATALOGUE_EN: &str = include_str!("../page/i18n/en.json");
/// The page's words in Simplified Chinese (`page/i18n/zh-CN.json`).
#[cfg(test)]
const CATALOGUE_ZH_CN: &str = include_str!("../page/i18n/zh-CN.json");
/// Both catalogues as one script the page loads before its own: `window.BA_I18N`, by language.
const I18N_JS: &str = concat!(
    "window.BA_I18N = {\"en\": ",
    include_str!("../page/i18n/en.json"),
    ", \"zh-CN\": ",
    include_str!("../page/i18n/zh-CN.json"),
    "};\n"
);

/// Where the page loads ECharts from (the file `cargo xtask assets` writes).
pub const ECHARTS_PATH: &str = "/assets/echarts.min.js";
/// The file name of ECharts in the assets folder.
pub const ECHARTS_FILE: &str = "echarts.min.js";

fn nonce() -> String {
    let mut bytes = [0u8; 18];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The page's policy for a response with `nonce`.
fn policy(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'self' 'nonce-{nonce}'; style-src 'self' 'unsafe-inline'; \
         img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; frame-src 'self'; \
         base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

fn with_headers(
    mut response: Response,
    content_type: &'static str,
    cache: &'static str,
) -> Response {
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /`: the page (any `?conversation=` is read by the page itself).
pub(crate) async fn index() -> Response {
    let nonce = nonce();
    let body = INDEX_HTML.replace("__NONCE__", &nonce);
    let mut response = with_headers(body.into_response(), "text/html; charset=utf-8", "no-store");
    let h = response.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&policy(&nonce)) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}

pub(crate) async fn app_js() -> Response {
    with_headers(
        APP_JS.into_response(),
        "text/javascript; charset=utf-8",
        "no-cache",
    )
}

pub(crate) async fn style_css() -> Response {
    with_headers(
        STYLE_CSS.into_response(),
        "text/css; charset=utf-8",
        "no-cache",
    )
}

pub(crate) async fn i18n_js() -> Response {
    with_headers(
        I18N_JS.into_response(),
        "text/javascript; charset=utf-8",
        "no-cache",
    )
}

fn echarts_file(state: &AppState) -> Option<PathBuf> {
    let path = state.config().assets_dir.as_ref()?.join(ECHARTS_FILE);
    path.is_file().then_some(path)
}

/// `GET /assets/echarts.min.js`: the file `cargo xtask assets` fetched, when present.
pub(crate) async fn echarts(State(state): State<AppState>) -> Response {
    let Some(path) = echarts_file(&state) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "no_echarts",
            "ECharts is not installed: run `cargo xtask assets` (it fetches the npm registry's \
             echarts package into target/assets) and restart the server",
        )
        .into_response();
    };
    match tokio::fs::read(&path).await {
        Ok(bytes) => with_headers(
            bytes.into_response(),
            "text/javascript; charset=utf-8",
            "public, max-age=3600",
        ),
        Err(e) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "io",
            format!("reading {}: {e}", path.display()),
        )
        .into_response(),
    }
}

/// `GET /page/status`: what the page can offer (no secret in it).
pub(crate) async fn status(State(state): State<AppState>) -> Response {
    let echarts = echarts_file(&state).is_some();
    with_headers(
        axum::Json(json!({"echarts": echarts, "echarts_path": ECHARTS_PATH})).into_response(),
        "application/json",
        "no-store",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_small() {
        // Uncompressed, comments and all: 100 KiB until the memory and schedule panels,
        // 128 KiB since (some 33 KiB gzipped).
        let total = APP_JS.len() + STYLE_CSS.len();
        assert!(
            total < 128 * 1024,
            "the page's JS and CSS weigh {total} bytes"
        );
        // The words come apart, one catalogue a language, each within its own budget.
        for catalogue in [CATALOGUE_EN, CATALOGUE_ZH_CN] {
            assert!(
                catalogue.len() < 32 * 1024,
                "a catalogue weighs {} bytes",
                catalogue.len()
            );
        }
        assert!(INDEX_HTML.contains("__NONCE__"));
    }

    /// The colour (`#rrggbb`) of custom property `--name` in the style sheet.
    fn colour(name: &str) -> Option<[f64; 3]> {
        let at = STYLE_CSS.find(&format!("--{name}:"))?;
        let hex = STYLE_CSS[at..].split_once('#')?.1.get(..6)?;
        let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).ok().map(f64::from);
        Some([channel(0)?, channel(2)?, channel(4)?])
    }

    /// WCAG 2 relative luminance.
    fn luminance([r, g, b]: [f64; 3]) -> f64 {
        let lin = |c: f64| {
            let c = c / 255.0;
            if c <= 0.039_28 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    }

    #[test]
    fn every_colour_pair_has_aa_contrast() {
        let names: Vec<&str> = STYLE_CSS
            .split("--")
            .skip(1)
            .filter_map(|rest| rest.split_once("-fg:").map(|(n, _)| n))
            .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric()))
            .collect();
        assert!(names.len() >= 15, "colour pairs found: {names:?}");
        for name in ["ta", "plan", "tool", "ok", "fail"] {
            assert!(names.contains(&name), "the {name} box has no colour pair");
        }
        for name in names {
            let fg = colour(&format!("{name}-fg")).unwrap_or_else(|| panic!("--{name}-fg"));
            let bg = colour(&format!("{name}-bg")).unwrap_or_else(|| panic!("--{name}-bg"));
            let (a, b) = (luminance(fg) + 0.05, luminance(bg) + 0.05);
            let ratio = a.max(b) / a.min(b);
            assert!(
                ratio >= 4.5,
                "--{name}-fg on --{name}-bg: contrast {ratio:.2} < 4.5"
            );
        }
    }

    /// The catalogue of `text` (one JSON object of strings).
    fn catalogue(text: &str) -> std::collections::BTreeMap<String, String> {
        serde_json::from_str(text).unwrap()
    }

    /// The first argument of each call `name('…'` in `source`.
    fn quoted_after<'a>(source: &'a str, opening: &str) -> Vec<&'a str> {
        source
            .match_indices(opening)
            .filter(|(at, _)| {
                // A call, not the end of another name (`ctx(`).
                !source[..*at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
            })
            .filter_map(|(at, _)| source[at + opening.len()..].split_once('\''))
            .map(|(key, _)| key)
            .collect()
    }

    /// The values of attribute `name` in the page's HTML.
    fn attribute<'a>(name: &str) -> Vec<&'a str> {
        INDEX_HTML
            .split(&format!(" {name}=\""))
            .skip(1)
            .filter_map(|rest| rest.split_once('"').map(|(v, _)| v))
            .collect()
    }

    /// Every key the page asks for: its script's `tx('…')` and `tn('…')` (a count: `.one` and
    /// `.other`), its HTML's `data-i18n*` attributes, and a sentence for each error code.
    fn used_keys() -> std::collections::BTreeSet<String> {
        let mut keys = std::collections::BTreeSet::new();
        keys.extend(quoted_after(APP_JS, "tx('").into_iter().map(str::to_owned));
        for key in quoted_after(APP_JS, "tn('") {
            keys.insert(format!("{key}.one"));
            keys.insert(format!("{key}.other"));
        }
        for name in [
            "data-i18n",
            "data-i18n-placeholder",
            "data-i18n-title",
            "data-i18n-aria-label",
        ] {
            keys.extend(attribute(name).into_iter().map(str::to_owned));
        }
        keys.extend(crate::ERROR_CODES.iter().map(|c| format!("error.{c}")));
        keys
    }

    #[test]
    fn both_catalogues_have_every_key_the_page_uses_and_no_other() {
        // Each call names its key in so many words: a key built at run time would escape this
        // test. The only others: the two definitions and the two that read the HTML's keys.
        let calls = APP_JS.matches("tx(").count() - APP_JS.matches("tx('").count();
        assert_eq!(calls, 4, "a tx( call whose key is not a literal");
        let used = used_keys();
        assert!(used.len() > 200, "{} keys", used.len());
        let placeholders = |s: &str| -> std::collections::BTreeSet<String> {
            s.split('{')
                .skip(1)
                .filter_map(|r| r.split_once('}'))
                .map(|(p, _)| p.to_owned())
                .collect()
        };
        let en = catalogue(CATALOGUE_EN);
        for (lang, text) in [("en", CATALOGUE_EN), ("zh-CN", CATALOGUE_ZH_CN)] {
            let words = catalogue(text);
            for key in &used {
                let value = words.get(key);
                assert!(
                    value.is_some_and(|v| !v.trim().is_empty() || key == "ctx.end"),
                    "{lang} has no `{key}`"
                );
            }
            for (key, value) in &words {
                assert!(
                    used.contains(key),
                    "{lang} has `{key}`, which the page never asks for"
                );
                // A singular may say "one" in words; every other form names what English names.
                if !key.ends_with(".one") {
                    assert_eq!(
                        placeholders(value),
                        placeholders(&en[key]),
                        "{lang} `{key}`"
                    );
                }
            }
        }
        let zh = catalogue(CATALOGUE_ZH_CN);
        let same: Vec<&String> = en
            .iter()
            .filter(|(k, v)| zh[*k] == **v)
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            same,
            ["app.name", "lang.en", "lang.zh"],
            "words left in English"
        );
    }

    #[test]
    fn the_html_has_no_word_outside_the_catalogues() {
        let mut text = String::new();
        for piece in INDEX_HTML.split('<').skip(1) {
            let (tag, after) = piece.split_once('>').unwrap();
            if !tag.starts_with('!') && !after.trim().is_empty() {
                text.push_str(&format!("<{tag}>{after}|"));
            }
        }
        assert_eq!(text, "", "text in the HTML that no catalogue holds");
        for name in ["placeholder", "title", "aria-label", "alt"] {
            assert_eq!(
                attribute(name),
                Vec::<&str>::new(),
                "a literal {name} attribute"
            );
        }
        // The script shows no literal words either: each text, label, title and notice is a key.
        for opening in [
            "text: '",
            "'aria-label': '",
            "title: '",
            "notice('",
            "placeholder: '",
        ] {
            let literal: Vec<&str> = quoted_after(APP_JS, opening)
                .into_iter()
                .filter(|s| s.chars().any(char::is_alphabetic) && *s != "notes.md")
                .collect();
            assert_eq!(
                literal,
                Vec::<&str>::new(),
                "words in the script after {opening}"
            );
        }
    }

    #[test]
    fn each_response_gets_its_own_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        assert!(policy(&a).contains(&format!("'nonce-{a}'")));
        assert!(!policy(&a).contains("unsafe-eval"));
    }
}
