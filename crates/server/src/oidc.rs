//! `--auth oidc`: a bearer JWT signed by the identity provider. The signature is checked with
//! the provider's published keys (a JWKS, from a URL or a file) by `jsonwebtoken`; then the
//! issuer, the audience and the expiry. The keys are cached and read again at most once a
//! minute, when a token names a key id the cache does not hold (the provider rotated its
//! keys). Why a token failed goes to the operator's log only. The server makes no outgoing
//! requests of its own: keys at a URL are read by the [`KeyFetcher`] the program hands over.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ba_storage::Role;
use base64::Engine as _;
use futures::future::BoxFuture;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::caller::{Caller, Refused, known_or_new};
use crate::settings::{AuthSettingsError, OidcSettings, UnknownUsers};
use crate::state::AppState;

/// Bytes of a JWKS at most.
const MAX_JWKS: usize = 1024 * 1024;
/// Keys of a JWKS kept at most.
const MAX_KEYS: usize = 64;
/// Bytes of a token at most.
const MAX_TOKEN: usize = 16 * 1024;
/// The keys are read again at most this often.
const REFETCH_EVERY: Duration = Duration::from_secs(60);

/// Reads an identity provider's published keys (a JWKS document) at a URL, for `jwks_url`.
/// The program supplies it with its own HTTP client: the server makes no outgoing requests.
pub trait KeyFetcher: Send + Sync + std::fmt::Debug {
    /// The body at `url`; more than `limit` bytes, a failure or a non-success status is an
    /// error saying what happened.
    fn fetch<'a>(&'a self, url: &'a str, limit: usize) -> BoxFuture<'a, Result<Vec<u8>, String>>;
}

/// Where the keys come from.
#[derive(Debug, Clone)]
enum Source {
    Url(String, Arc<dyn KeyFetcher>),
    File(PathBuf),
}

#[derive(Debug, Default)]
struct Keys {
    set: JwkSet,
    fetched: Option<Instant>,
}

/// The checked identity provider settings and the cache of its keys.
#[derive(Debug, Clone)]
pub struct Oidc(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    issuer: String,
    audience: String,
    source: Source,
    algorithms: Vec<Algorithm>,
    user_claim: String,
    role_claim: Option<String>,
    unknown_users: UnknownUsers,
    keys: Mutex<Keys>,
}

fn invalid(field: &'static str, reason: String) -> AuthSettingsError {
    AuthSettingsError::Invalid {
        section: "oidc",
        field,
        reason,
    }
}

fn required(value: &str, field: &'static str) -> Result<String, AuthSettingsError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(AuthSettingsError::Missing {
            section: "oidc",
            field,
        });
    }
    Ok(value.to_owned())
}

impl Oidc {
    pub(crate) fn new(
        settings: &OidcSettings,
        fetcher: Option<Arc<dyn KeyFetcher>>,
    ) -> Result<Self, AuthSettingsError> {
        let issuer = required(&settings.issuer, "issuer")?;
        let audience = required(&settings.audience, "audience")?;
        let user_claim = required(&settings.user_claim, "user_claim")?;
        let source = match (&settings.jwks_url, &settings.jwks_file) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "jwks_url",
                    "give `jwks_url` or `jwks_file`, not both".into(),
                ));
            }
            (Some(url), None) => {
                let url = url.trim();
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(invalid(
                        "jwks_url",
                        format!("{url:?} is not an http(s) URL"),
                    ));
                }
                let fetcher = fetcher.ok_or_else(|| {
                    invalid(
                        "jwks_url",
                        "this program reads no keys over HTTP; give `jwks_file`".into(),
                    )
                })?;
                Source::Url(url.to_owned(), fetcher)
            }
            (None, Some(file)) => Source::File(file.clone()),
            (None, None) => {
                return Err(invalid(
                    "jwks_url",
                    "give the provider's keys as `jwks_url` or `jwks_file`".into(),
                ));
            }
        };
        if settings.algorithms.is_empty() {
            return Err(AuthSettingsError::Missing {
                section: "oidc",
                field: "algorithms",
            });
        }
        let mut algorithms = Vec::new();
        for name in &settings.algorithms {
            let alg: Algorithm = name.trim().parse().map_err(|_| {
                invalid(
                    "algorithms",
                    format!("{name:?} is not a signature algorithm (RS256, ES256, …)"),
                )
            })?;
            if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
                return Err(invalid(
                    "algorithms",
                    format!(
                        "{name} is a shared-secret algorithm; only RS*, PS*, ES* and EdDSA are accepted"
                    ),
                ));
            }
            algorithms.push(alg);
        }
        Ok(Self(Arc::new(Inner {
            issuer,
            audience,
            source,
            algorithms,
            user_claim,
            role_claim: settings.role_claim.clone().filter(|c| !c.trim().is_empty()),
            unknown_users: settings.unknown_users,
            keys: Mutex::new(Keys::default()),
        })))
    }

    /// The token's claims when it is good; otherwise why it is not (for the log).
    pub(crate) async fn verify(&self, token: &[u8]) -> Result<Map<String, Value>, String> {
        let inner = &self.0;
        if token.len() > MAX_TOKEN {
            return Err(format!("a token of {} bytes", token.len()));
        }
        let token =
            std::str::from_utf8(token).map_err(|_| "a token that is not text".to_owned())?;
        let header = jsonwebtoken::decode_header(token).map_err(|e| match raw_alg(token) {
            Some(alg) if alg.eq_ignore_ascii_case("none") => {
                "an unsigned token (alg \"none\")".to_owned()
            }
            Some(alg) => format!("algorithm {alg:?} is not accepted ({e})"),
            None => format!("not a JWT: {e}"),
        })?;
        if !inner.algorithms.contains(&header.alg) {
            return Err(format!(
                "algorithm {:?} is not accepted (only {:?})",
                header.alg, inner.algorithms
            ));
        }
        let key = self.key(header.kid.as_deref()).await?;
        if let Some(alg) = key.common.key_algorithm
            && format!("{alg:?}") != format!("{:?}", header.alg)
        {
            return Err(format!(
                "the token says {:?}, its key is for {alg:?}",
                header.alg
            ));
        }
        let decoding = DecodingKey::from_jwk(&key)
            .map_err(|e| format!("a key of the JWKS cannot be used: {e}"))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&inner.issuer]);
        validation.set_audience(&[&inner.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &validation)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                match e.kind() {
                    ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
                    ErrorKind::InvalidAudience => {
                        format!("the token is not for audience {:?}", inner.audience)
                    }
                    ErrorKind::InvalidIssuer => {
                        format!("the token is not from issuer {:?}", inner.issuer)
                    }
                    ErrorKind::InvalidSignature => "the signature does not verify".to_owned(),
                    ErrorKind::InvalidAlgorithm => {
                        format!("algorithm {:?} does not fit the key", header.alg)
                    }
                    ErrorKind::MissingRequiredClaim(c) => format!("the token has no `{c}`"),
                    ErrorKind::ImmatureSignature => "the token is not valid yet".to_owned(),
                    _ => format!("the token was refused: {e}"),
                }
            })?;
        Ok(data.claims)
    }

    /// The caller a verified token names.
    pub(crate) async fn caller(
        &self,
        state: &AppState,
        claims: &Map<String, Value>,
    ) -> Result<Caller, Refused> {
        let inner = &self.0;
        let name = claims
            .get(&inner.user_claim)
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| Refused(format!("the token has no `{}` claim", inner.user_claim)))?;
        ba_storage::check_user_name(name)
            .map_err(|e| Refused(format!("the token names a bad user: {e}")))?;
        let claimed = match inner.role_claim.as_deref().and_then(|c| claims.get(c)) {
            None => None,
            Some(Value::String(role)) => Some(
                role.parse::<Role>()
                    .map_err(|e| Refused(format!("the token's role claim is not a role: {e}")))?,
            ),
            Some(other) => {
                return Err(Refused(format!(
                    "the token's role claim is not a role: {other}"
                )));
            }
        };
        known_or_new(state, name, inner.unknown_users, claimed).await
    }

    /// The key a token names; the keys are read again when the id is new and the last read
    /// is over a minute old.
    async fn key(&self, kid: Option<&str>) -> Result<jsonwebtoken::jwk::Jwk, String> {
        let mut keys = self.0.keys.lock().await;
        let stale = keys.fetched.is_none_or(|at| at.elapsed() >= REFETCH_EVERY);
        if let Some(key) = pick(&keys.set, kid) {
            return Ok(key);
        }
        if !stale {
            return Err(unknown_key(kid));
        }
        // Marked first, so a provider that fails is not asked again at every request.
        keys.fetched = Some(Instant::now());
        match self.fetch().await {
            Ok(set) => keys.set = set,
            Err(e) => {
                tracing::warn!("the identity provider's keys could not be read: {e}");
            }
        }
        pick(&keys.set, kid).ok_or_else(|| unknown_key(kid))
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let bytes = match &self.0.source {
            Source::File(path) => {
                let meta = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                if meta.len() > MAX_JWKS as u64 {
                    return Err(format!("{} is over {MAX_JWKS} bytes", path.display()));
                }
                tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("{}: {e}", path.display()))?
            }
            Source::Url(url, fetcher) => fetcher
                .fetch(url, MAX_JWKS)
                .await
                .map_err(|e| format!("{url}: {e}"))?,
        };
        let mut set: JwkSet =
            serde_json::from_slice(&bytes).map_err(|e| format!("not a JWKS: {e}"))?;
        set.keys.truncate(MAX_KEYS);
        Ok(set)
    }
}

fn unknown_key(kid: Option<&str>) -> String {
    match kid {
        Some(kid) => format!(
            "key id {:?} is not among the provider's keys",
            kid.chars().take(100).collect::<String>()
        ),
        None => "the token names no key id and the provider has several keys".to_owned(),
    }
}

/// The key named `kid`; a token without one may use the only key of a one-key set.
fn pick(set: &JwkSet, kid: Option<&str>) -> Option<jsonwebtoken::jwk::Jwk> {
    match kid {
        Some(kid) => set.find(kid).cloned(),
        None if set.keys.len() == 1 => set.keys.first().cloned(),
        None => None,
    }
}

/// The `alg` a token's header claims, read without trusting it (for the log only).
fn raw_alg(token: &str) -> Option<String> {
    let header = token.split('.').next()?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(header.trim_end_matches('='))
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value.get("alg")?.as_str().map(str::to_owned)
}
