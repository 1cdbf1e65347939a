//! Who may talk to the server: the sign-in on every API route (one token, the directory's
//! tokens, an identity provider's JWT or a trusted proxy's user header — [`Auth`]), and the
//! `Host` and `Origin` checks that keep a page on another site — or a DNS name rebound to
//! loopback — out.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rand::RngCore as _;

use crate::caller::{Caller, Refused, directory, known_or_new};
use crate::error::ApiError;
pub use crate::oidc::{KeyFetcher, Oidc};
pub use crate::proxy::Proxy;
use crate::settings::{AuthMode, AuthSettings, AuthSettingsError};
use crate::state::AppState;

/// The secret every API request carries as `Authorization: Bearer TOKEN`.
#[derive(Clone)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// A token given by the operator; `None` when it is empty or has characters a header
    /// cannot carry.
    pub fn new(token: &str) -> Option<Self> {
        let token = token.trim();
        let fits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_graphic());
        fits.then(|| Self(token.into()))
    }

    /// 32 random bytes from the operating system's generator, hex-encoded.
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self(hex.into())
    }

    /// The token's text (to print it once, at start).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `candidate` is the token, in time that depends on the lengths only.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        let mut diff = u8::from(expected.len() != candidate.len());
        for (i, e) in expected.iter().enumerate() {
            diff |= e ^ candidate.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

/// Which `Host` values (and `Origin` hosts) the server answers.
#[derive(Debug, Clone)]
pub struct HostCheck {
    /// `host:port` values accepted, lowercased; empty means any host (a non-loopback bind
    /// without an allow-list, where the token alone guards).
    allowed: Vec<String>,
}

impl HostCheck {
    /// The names of `addr`: for a loopback address `localhost`, `127.0.0.1` and `[::1]` with
    /// its port; for another address its own text, unless `extra` names more hosts. `extra`
    /// (`host:port`) is always accepted too.
    pub fn for_addr(addr: SocketAddr, extra: &[String]) -> Self {
        let port = addr.port();
        let mut allowed: Vec<String> = extra.iter().map(|h| h.to_ascii_lowercase()).collect();
        if addr.ip().is_loopback() {
            for name in ["localhost", "127.0.0.1", "[::1]"] {
                allowed.push(format!("{name}:{port}"));
            }
        } else if addr.ip().is_unspecified() {
            if !allowed.is_empty() {
                allowed.push(format!("localhost:{port}"));
                allowed.push(format!("127.0.0.1:{port}"));
            }
        } else {
            allowed.push(addr.to_string());
        }
        Self { allowed }
    }

    fn accepts(&self, host: &str) -> bool {
        if self.allowed.is_empty() {
            return true;
        }
        let host = host.to_ascii_lowercase();
        self.allowed.contains(&host)
    }
}

/// How callers are told apart; the CLI builds one from [`AuthSettings`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Auth {
    /// One secret for one person: whoever holds it is `owner`, an admin.
    Token(Token),
    /// Each user's own tokens, kept hashed in the store's directory.
    Users,
    /// A bearer JWT from an identity provider, checked against its published keys.
    Oidc(Oidc),
    /// A user header set by a reverse proxy, believed only from the proxy's addresses.
    Proxy(Proxy),
}

impl AuthSettings {
    /// The checked sign-in; `token` is the secret of `mode: token` (unused by the others),
    /// `keys` what reads an identity provider's keys at `oidc.jwks_url` (the program's HTTP
    /// client; without one only `jwks_file` works).
    ///
    /// # Errors
    /// A mode without its section, an empty issuer, audience or header, no keys or two
    /// sources of keys, a `jwks_url` and no `keys`, an algorithm that is unknown or not
    /// asymmetric, a proxy address that is neither an IP nor a CIDR range.
    pub fn build(
        &self,
        token: Token,
        keys: Option<Arc<dyn KeyFetcher>>,
    ) -> Result<Auth, AuthSettingsError> {
        match self.mode {
            AuthMode::Token => Ok(Auth::Token(token)),
            AuthMode::Users => Ok(Auth::Users),
            AuthMode::Oidc => {
                let oidc = self
                    .oidc
                    .as_ref()
                    .ok_or(AuthSettingsError::MissingSection { mode: "oidc" })?;
                Ok(Auth::Oidc(Oidc::new(oidc, keys)?))
            }
            AuthMode::Proxy => {
                let proxy = self
                    .proxy
                    .as_ref()
                    .ok_or(AuthSettingsError::MissingSection { mode: "proxy" })?;
                Ok(Auth::Proxy(Proxy::new(proxy)?))
            }
        }
    }
}

/// What the middlewares need.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) auth: Auth,
    pub(crate) hosts: HostCheck,
    pub(crate) state: AppState,
}

/// `Host` must be one of ours, and an `Origin`, when sent, must be this server (403 otherwise).
pub(crate) async fn check_host(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let Some(host) = host else {
        return forbidden("the request names no host");
    };
    if !guard.hosts.accepts(host) {
        return forbidden(&format!("host {host:?} is not served here"));
    }
    // A report in the page's sandboxed frame has an opaque origin (`Origin: null`): the one
    // request it may make is for the chart library; an API call from it is refused here too.
    let sandboxed_asset = request.method() == axum::http::Method::GET
        && request.uri().path() == crate::page::ECHARTS_PATH
        && headers.get(header::ORIGIN).is_some_and(|o| o == "null");
    if let Some(origin) = headers.get(header::ORIGIN).filter(|_| !sandboxed_asset) {
        let origin = origin.to_str().unwrap_or("");
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .map(|rest| rest.trim_end_matches('/'));
        match origin_host {
            Some(o) if guard.hosts.accepts(o) && o.eq_ignore_ascii_case(host) => {}
            _ => return forbidden(&format!("origin {origin:?} is not this server")),
        }
    }
    next.run(request).await
}

/// Every API route needs a caller (401 otherwise); the caller goes into the request's
/// extensions.
pub(crate) async fn authenticate(
    State(guard): State<Arc<Guard>>,
    mut request: Request,
    next: Next,
) -> Response {
    // The scheme is case-insensitive (RFC 9110 §11.1): `bearer` and `BEARER` are `Bearer`.
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|h| bearer_token(h.as_bytes()))
        .map(<[u8]>::to_vec);
    let caller = match &guard.auth {
        Auth::Token(token) => match &bearer {
            Some(t) if token.matches(t) => Ok(Caller::owner()),
            Some(_) => {
                return unauthorized("the bearer token is wrong");
            }
            None => {
                return unauthorized(
                    "send `Authorization: Bearer TOKEN` (the token the server printed at start)",
                );
            }
        },
        Auth::Users => match &bearer {
            Some(t) => user_of_token(&guard.state, t).await,
            None => Err(Refused("no bearer token".into())),
        },
        Auth::Oidc(oidc) => match &bearer {
            Some(t) => match oidc.verify(t).await {
                Ok(claims) => oidc.caller(&guard.state, &claims).await,
                Err(why) => Err(Refused(why)),
            },
            None => Err(Refused("no bearer token".into())),
        },
        Auth::Proxy(proxy) => {
            let peer = request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|c| c.0.ip());
            match proxy.user(peer, request.headers()) {
                Ok(name) => known_or_new(&guard.state, &name, proxy.unknown_users, None).await,
                Err(why) => Err(Refused(why)),
            }
        }
    };
    match caller {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(Refused(why)) => {
            tracing::warn!(
                "sign-in refused for {} {}: {why}",
                request.method(),
                request.uri().path()
            );
            unauthorized("sign in: send `Authorization: Bearer TOKEN`")
        }
    }
}

fn unauthorized(message: &str) -> Response {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response()
}

async fn user_of_token(state: &AppState, secret: &[u8]) -> Result<Caller, Refused> {
    let directory = directory(state)?;
    let secret =
        std::str::from_utf8(secret).map_err(|_| Refused("a token that is not text".into()))?;
    match directory.authenticate(secret).await {
        Ok(Some(user)) => Ok(Caller {
            name: user.name,
            role: user.role,
        }),
        Ok(None) => Err(Refused("an unknown or revoked token".into())),
        Err(e) => Err(Refused(format!("the directory could not be read: {e}"))),
    }
}

/// The token of an `Authorization` value whose scheme is `Bearer` in any case, the spaces
/// after the scheme skipped.
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first().is_none_or(|b| *b != b' ') {
        return None;
    }
    let start = rest.iter().position(|b| *b != b' ')?;
    Some(&rest[start..])
}

fn forbidden(message: &str) -> Response {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        let t = Token::new("secret-1").unwrap_or_else(Token::random);
        assert!(t.matches(b"secret-1"));
        assert!(!t.matches(b"secret-"));
        assert!(!t.matches(b"secret-12"));
        assert!(!t.matches(b""));
        assert!(Token::new(" ").is_none());
        assert!(Token::new("a b").is_none());
        assert_eq!(Token::random().expose().len(), 64);
    }

    #[test]
    fn loopback_hosts_only_with_the_port() {
        let check = HostCheck::for_addr(SocketAddr::from(([127, 0, 0, 1], 8765)), &[]);
        assert!(check.accepts("127.0.0.1:8765"));
        assert!(check.accepts("LOCALHOST:8765"));
        assert!(!check.accepts("localhost:80"));
        assert!(!check.accepts("evil.example:8765"));
        let any = HostCheck::for_addr(SocketAddr::from(([0, 0, 0, 0], 80)), &[]);
        assert!(any.accepts("server.internal"));
        // IPv6 loopback, named as browsers name it.
        let v6 = HostCheck::for_addr(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 8765)), &[]);
        assert!(v6.accepts("[::1]:8765"));
        assert!(v6.accepts("localhost:8765"));
        assert!(!v6.accepts("[::1]:80"));
        assert!(!v6.accepts("evil.example:8765"));
    }

    #[test]
    fn the_bearer_scheme_in_any_case() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"BEARER   abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearerabc"), None);
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }

    mod settings {
        use std::sync::Arc;

        use super::*;
        use crate::settings::OidcSettings;

        /// Never called: the settings are only checked.
        #[derive(Debug)]
        struct NoFetch;

        impl KeyFetcher for NoFetch {
            fn fetch<'a>(
                &'a self,
                _url: &'a str,
                _limit: usize,
            ) -> futures::future::BoxFuture<'a, Result<Vec<u8>, String>> {
                Box::pin(async { Err("not here".to_owned()) })
            }
        }

        fn build(yaml: serde_json::Value) -> Result<Auth, String> {
            let settings: AuthSettings = serde_json::from_value(yaml).map_err(|e| e.to_string())?;
            settings
                .build(Token::random(), Some(Arc::new(NoFetch)))
                .map_err(|e| e.to_string())
        }

        #[test]
        fn settings_that_cannot_work_are_named() {
            use serde_json::json;
            let cases = [
                (
                    json!({"mode": "oidc"}),
                    "auth mode `oidc` needs an `auth.oidc` section",
                ),
                (
                    json!({"mode": "proxy"}),
                    "auth mode `proxy` needs an `auth.proxy` section",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": " ", "audience": "a", "jwks_file": "k"}}),
                    "`auth.oidc.issuer` is required and empty",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "", "jwks_file": "k"}}),
                    "`auth.oidc.audience` is required and empty",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a"}}),
                    "`auth.oidc.jwks_url`: give the provider's keys as `jwks_url` or `jwks_file`",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a", "jwks_file": "k", "jwks_url": "http://x"}}),
                    "`auth.oidc.jwks_url`: give `jwks_url` or `jwks_file`, not both",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a", "jwks_file": "k", "algorithms": ["HS256"]}}),
                    "`auth.oidc.algorithms`: HS256 is a shared-secret algorithm; only RS*, PS*, ES* and EdDSA are accepted",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a", "jwks_file": "k", "algorithms": ["none"]}}),
                    "`auth.oidc.algorithms`: \"none\" is not a signature algorithm (RS256, ES256, …)",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a", "jwks_file": "k", "algorithms": []}}),
                    "`auth.oidc.algorithms` is required and empty",
                ),
                (
                    json!({"mode": "oidc", "oidc": {"issuer": "i", "audience": "a", "jwks_url": "ftp://x"}}),
                    "`auth.oidc.jwks_url`: \"ftp://x\" is not an http(s) URL",
                ),
                (
                    json!({"mode": "proxy", "proxy": {"trusted": ["10.0.0.300"]}}),
                    "`auth.proxy.trusted`: \"10.0.0.300\" is neither an IP address nor a CIDR range",
                ),
                (
                    json!({"mode": "proxy", "proxy": {"trusted": []}}),
                    "`auth.proxy.trusted` is required and empty",
                ),
                (
                    json!({"mode": "proxy", "proxy": {"trusted": ["127.0.0.1"], "header": "bad header"}}),
                    "`auth.proxy.header`: \"bad header\" is not a header name",
                ),
            ];
            for (settings, expected) in cases {
                let got = build(settings.clone()).err();
                assert_eq!(got.as_deref(), Some(expected), "{settings}");
            }
            assert!(build(serde_json::json!({"mode": "users"})).is_ok());
            assert!(build(serde_json::json!({})).is_ok());
            assert!(
            build(serde_json::json!({"mode": "proxy", "proxy": {"trusted": ["127.0.0.1", "10.0.0.0/8", "::1"]}}))
                .is_ok()
        );
            let without_client = AuthSettings::new(AuthMode::Oidc)
                .with_oidc(OidcSettings::new("i", "a").with_jwks_url("https://id.example/keys"))
                .build(Token::random(), None)
                .err()
                .map(|e| e.to_string());
            assert_eq!(
                without_client.as_deref(),
                Some(
                    "`auth.oidc.jwks_url`: this program reads no keys over HTTP; give `jwks_file`"
                )
            );
            let unknown = build(serde_json::json!({"mode": "users", "extra": 1})).err();
            assert!(unknown.is_some_and(|e| e.contains("unknown field `extra`")));
        }
    }
}
