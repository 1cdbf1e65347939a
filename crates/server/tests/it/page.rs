//! The page's routes: served without the token, under a per-response policy; ECharts only when
//! installed; a sandboxed report (`Origin: null`) may load ECharts and nothing else.

use serde_json::Value;

use crate::harness::{Model, Server, TOKEN, client, dir};

#[tokio::test]
async fn the_page_is_served_without_the_token_under_its_policy() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let http = client();
    let mut nonces = Vec::new();
    for _ in 0..2 {
        let r = http.get(server.url("/")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let h = r.headers().clone();
        assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
        assert_eq!(h["x-frame-options"], "DENY");
        let csp = h["content-security-policy"].to_str().unwrap().to_owned();
        for part in [
            "default-src 'none'",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(part), "{part} missing from {csp}");
        }
        assert!(!csp.contains("unsafe-eval"));
        let nonce = csp
            .split("'nonce-")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap()
            .to_owned();
        let body = r.text().await.unwrap();
        assert!(body.contains(&format!("content=\"{nonce}\"")));
        assert!(!body.contains("__NONCE__"));
        nonces.push(nonce);
    }
    assert_ne!(nonces[0], nonces[1]);
    for (path, kind) in [
        ("/page/app.js", "text/javascript"),
        ("/page/style.css", "text/css"),
    ] {
        let r = http.get(server.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        assert!(
            r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
    }
}

#[tokio::test]
async fn echarts_is_named_when_missing_and_a_sandbox_reaches_nothing_else() {
    let (_d, path) = dir();
    let server = Server::start(&path, Model::new(&[], 0));
    let http = client();
    let status: Value = http
        .get(server.url("/page/status"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["echarts"], false);
    let r = http
        .get(server.url(ba_server::ECHARTS_PATH))
        .header("origin", "null")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "a sandboxed report may ask for ECharts");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_echarts");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cargo xtask assets")
    );
    for path in ["/api/v1/conversations", "/page/status", "/"] {
        let r = http
            .get(server.url(path))
            .bearer_auth(TOKEN)
            .header("origin", "null")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path} from an opaque origin");
    }
}
