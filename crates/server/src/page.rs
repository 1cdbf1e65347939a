//! The analyst's page, embedded in the binary: `GET /` (the HTML, with a fresh CSP nonce),
//! `/page/app.js` and `/page/style.css` (our own code, no build step), and
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

    #[test]
    fn each_response_gets_its_own_nonce() {
        let (a, b) = (nonce(), nonce());
        assert_ne!(a, b);
        assert!(policy(&a).contains(&format!("'nonce-{a}'")));
        assert!(!policy(&a).contains("unsafe-eval"));
    }
}
