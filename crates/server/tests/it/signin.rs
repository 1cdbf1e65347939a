//! Sign-in by an identity provider's JWT (`--auth oidc`, a key pair and JWKS made here) and by
//! a trusted proxy's user header (`--auth proxy`): each refusal is a bare 401 whose reason is
//! in the server's log only.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use aws_lc_rs::encoding::AsDer as _;
use aws_lc_rs::signature::KeyPair as _;
use ba_server::{
    AuthMode, AuthSettings, KeyFetcher, OidcSettings, ProxySettings, Token, UnknownUsers,
};
use ba_storage::{ConversationStore, FileStore, Role};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{Model, Options, Server, dir};

const ISSUER: &str = "https://id.example.test";
const AUDIENCE: &str = "ba-agent";

/// What the server's threads logged.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn dispatch(&self) -> tracing::Dispatch {
        let sink = self.clone();
        tracing::Dispatch::new(
            tracing_subscriber::fmt()
                .with_writer(move || sink.clone())
                .finish(),
        )
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The program's side of `jwks_url`: its HTTP client reads the keys.
#[derive(Debug)]
struct Http;

impl KeyFetcher for Http {
    fn fetch<'a>(
        &'a self,
        url: &'a str,
        limit: usize,
    ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let response = reqwest::get(url)
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| e.to_string())?;
            let body = response.bytes().await.map_err(|e| e.to_string())?;
            if body.len() > limit {
                return Err(format!("over {limit} bytes"));
            }
            Ok(body.to_vec())
        })
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The length and the header size of the DER element at the start of `der`.
fn der_len(der: &[u8]) -> (usize, usize) {
    let first = der[1];
    if first < 0x80 {
        return (first as usize, 2);
    }
    let n = (first & 0x7f) as usize;
    let len = der[2..2 + n]
        .iter()
        .fold(0usize, |acc, b| acc << 8 | *b as usize);
    (len, 2 + n)
}

/// The PKCS#1 key inside a PKCS#8 `PrivateKeyInfo` (version, algorithm, then the key as an
/// OCTET STRING): `jsonwebtoken` signs with PKCS#1.
fn pkcs1_of(pkcs8: &[u8]) -> Vec<u8> {
    let (_, head) = der_len(pkcs8);
    let mut rest = &pkcs8[head..];
    for _ in 0..2 {
        let (len, head) = der_len(rest);
        rest = &rest[head + len..];
    }
    assert_eq!(rest[0], 0x04, "the key is an OCTET STRING");
    let (len, head) = der_len(rest);
    rest[head..head + len].to_vec()
}

/// An RSA key pair made for the test: what signs, the JWKS entry of its public half, and
/// the public key's DER (for the HS256 forgery).
struct Keys {
    signing: EncodingKey,
    jwk: Value,
    public_der: Vec<u8>,
}

fn keys(kid: &str) -> Keys {
    let pair = aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
    let pkcs8 = pair.as_der().unwrap();
    let signing = EncodingKey::from_rsa_der(&pkcs1_of(pkcs8.as_ref()));
    let public = pair.public_key();
    let jwk = json!({
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid,
        "n": b64(public.modulus().big_endian_without_leading_zero()),
        "e": b64(public.exponent().big_endian_without_leading_zero()),
    });
    let public_der = public.as_der().unwrap().as_ref().to_vec();
    Keys {
        signing,
        jwk,
        public_der,
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(user: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600, "iat": now(),
           "sub": format!("id-{user}"), "preferred_username": user})
}

fn signed(keys: &Keys, kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, claims, &keys.signing).unwrap()
}

async fn me(server: &Server, token: &str) -> (StatusCode, String) {
    let r = reqwest::Client::new()
        .get(server.url("/api/v1/me"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

fn oidc_server(
    settings: OidcSettings,
    log: &Captured,
) -> (tempfile::TempDir, Server, Arc<dyn ConversationStore>) {
    let (d, path) = dir();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(&path).unwrap());
    let auth = AuthSettings::new(AuthMode::Oidc)
        .with_oidc(settings)
        .build(Token::random(), Some(Arc::new(Http)))
        .unwrap();
    let server = Server::start_with(
        &path,
        Model::new(&[], 0),
        Options {
            store: Some(Arc::clone(&store)),
            auth: Some(auth),
            log: Some(log.dispatch()),
            ..Options::default()
        },
    );
    (d, server, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_providers_tokens_sign_in_and_each_bad_one_is_a_bare_401() {
    let key = keys("k1");
    let (_keys_dir, keys_path) = dir();
    let jwks = keys_path.join("jwks.json");
    std::fs::write(&jwks, json!({"keys": [key.jwk]}).to_string()).unwrap();
    let log = Captured::default();
    let (_d, server, store) = oidc_server(
        OidcSettings::new(ISSUER, AUDIENCE)
            .with_jwks_file(&jwks)
            .with_role_claim("ba_role"),
        &log,
    );
    // A good token: alice, unknown so far, is added as an analyst.
    let (status, body) = me(&server, &signed(&key, "k1", &claims("alice"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (body["name"].as_str(), body["role"].as_str()),
        (Some("alice"), Some("analyst"))
    );
    let alice = store
        .directory()
        .unwrap()
        .user("alice")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alice.role, Role::Analyst);
    // The role claim, when the token has it, wins.
    let mut admin = claims("root");
    admin["ba_role"] = json!("admin");
    let (status, body) = me(&server, &signed(&key, "k1", &admin)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("\"role\":\"admin\""), "{body}");

    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    let mut wrong_audience = claims("alice");
    wrong_audience["aud"] = json!("another-app");
    let mut wrong_issuer = claims("alice");
    wrong_issuer["iss"] = json!("https://evil.example.test");
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(claims("alice").to_string().as_bytes())
    );
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = Some("k1".into());
    let hs256_with_public_key = jsonwebtoken::encode(
        &hs_header,
        &claims("alice"),
        &EncodingKey::from_secret(&key.public_der),
    )
    .unwrap();
    let other = keys("k2");
    let cases = [
        (
            "expired",
            signed(&key, "k1", &expired),
            "the token has expired",
        ),
        (
            "wrong audience",
            signed(&key, "k1", &wrong_audience),
            "the token is not for audience \"ba-agent\"",
        ),
        (
            "wrong issuer",
            signed(&key, "k1", &wrong_issuer),
            "the token is not from issuer \"https://id.example.test\"",
        ),
        ("alg none", unsigned, "an unsigned token (alg \"none\")"),
        (
            "HS256 with the public key",
            hs256_with_public_key,
            "algorithm HS256 is not accepted",
        ),
        (
            "unknown kid",
            signed(&other, "k2", &claims("alice")),
            "key id \"k2\" is not among the provider's keys",
        ),
        (
            "signed by another key under a known kid",
            signed(&other, "k1", &claims("alice")),
            "the signature does not verify",
        ),
    ];
    for (case, token, reason) in cases {
        let before = log.text().len();
        let (status, body) = me(&server, &token).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}: {body}");
        assert!(
            !body.contains(reason),
            "{case}: the answer says why: {body}"
        );
        assert!(body.contains("\"code\":\"unauthorized\""), "{case}: {body}");
        let logged = log.text()[before..].to_owned();
        assert!(
            logged.contains(reason) && logged.contains("WARN"),
            "{case}: the log does not say {reason:?}: {logged}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keys_come_from_a_url_read_again_at_most_once_a_minute() {
    let key = keys("k1");
    let fetches = Arc::new(AtomicUsize::new(0));
    let served = json!({"keys": [key.jwk]});
    let counter = Arc::clone(&fetches);
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            counter.fetch_add(1, Ordering::SeqCst);
            let body = served.clone();
            async move { axum::Json(body) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    let provider = tokio::spawn(async move { axum::serve(listener, app).await });
    let log = Captured::default();
    let (_d, server, _store) = oidc_server(
        OidcSettings::new(ISSUER, AUDIENCE)
            .with_jwks_url(url)
            .with_unknown_users(UnknownUsers::Refuse),
        &log,
    );
    // Refused: the directory does not know bob, and the settings add nobody.
    let (status, _) = me(&server, &signed(&key, "k1", &claims("bob"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        log.text().contains("user \"bob\" is not in the directory"),
        "{}",
        log.text()
    );
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    // An unknown key id right after a read does not make the provider read again.
    let other = keys("k9");
    for _ in 0..3 {
        let (status, _) = me(&server, &signed(&other, "k9", &claims("bob"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        1,
        "the keys were read again within a minute"
    );
    provider.abort();
}

fn proxy_server(trusted: &str) -> (tempfile::TempDir, Server, Captured) {
    let (d, path) = dir();
    let store: Arc<dyn ConversationStore> = Arc::new(FileStore::open(&path).unwrap());
    let auth = AuthSettings::new(AuthMode::Proxy)
        .with_proxy(ProxySettings::new(vec![trusted.into()]))
        .build(Token::random(), None)
        .unwrap();
    let log = Captured::default();
    let server = Server::start_with(
        &path,
        Model::new(&[], 0),
        Options {
            store: Some(store),
            auth: Some(auth),
            log: Some(log.dispatch()),
            ..Options::default()
        },
    );
    (d, server, log)
}

async fn as_forwarded(server: &Server, user: Option<&str>) -> (StatusCode, String) {
    let mut r = reqwest::Client::new().get(server.url("/api/v1/me"));
    if let Some(user) = user {
        r = r.header("X-Forwarded-User", user);
    }
    let r = r.send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxys_user_header_counts_from_its_address_only() {
    let (_d, trusted, _log) = proxy_server("127.0.0.0/8");
    let (status, body) = as_forwarded(&trusted, Some("alice")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("\"name\":\"alice\""), "{body}");
    let (status, _) = as_forwarded(&trusted, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let (_d2, elsewhere, log) = proxy_server("10.9.9.9");
    let (status, body) = as_forwarded(&elsewhere, Some("alice")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(!body.contains("alice"));
    assert!(
        log.text()
            .contains("X-Forwarded-User from 127.0.0.1, which is not a trusted proxy"),
        "{}",
        log.text()
    );
}
