//! The sign-in settings as a configuration file holds them (`auth: {mode, oidc, proxy}`),
//! checked into an [`crate::Auth`] by [`AuthSettings::build`] before the server starts, so a
//! missing issuer or a bad proxy address stops the start with a sentence instead of refusing
//! every request later.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How callers sign in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// One bearer token; its holder is `owner`, an admin (a lone user's server).
    #[default]
    Token,
    /// The store's users, each with tokens of their own.
    Users,
    /// A bearer JWT from an OpenID Connect identity provider.
    Oidc,
    /// A user header from a trusted reverse proxy.
    Proxy,
}

/// What happens to a user the identity provider or the proxy names and the directory does
/// not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnknownUsers {
    /// Added to the directory as an analyst at the first request.
    #[default]
    Create,
    /// Refused (401) until an admin adds them.
    Refuse,
}

/// `auth:` in the configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
#[non_exhaustive]
pub struct AuthSettings {
    /// `token` (default), `users`, `oidc` or `proxy`.
    #[serde(default)]
    pub mode: AuthMode,
    /// The identity provider, for `mode: oidc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<OidcSettings>,
    /// The reverse proxy, for `mode: proxy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySettings>,
}

/// `auth.oidc:` — whose tokens are believed, and how a token names its user.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
#[non_exhaustive]
pub struct OidcSettings {
    /// The `iss` every token must carry (the provider's URL).
    pub issuer: String,
    /// The `aud` every token must include (this server's client id).
    pub audience: String,
    /// Where the provider publishes its keys (JWKS); or `jwks_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_url: Option<String>,
    /// A JWKS kept on disk; or `jwks_url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_file: Option<PathBuf>,
    /// Signature algorithms accepted (`RS256` and `ES256` by default); asymmetric ones only:
    /// `none` and the HMAC family are refused, so a public key can never serve as a secret.
    #[serde(default = "default_algorithms")]
    pub algorithms: Vec<String>,
    /// The claim that names the user (`preferred_username` by default; there is no fallback
    /// to another claim, so that one person never gets two names — set `sub` to use it).
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// A claim whose value (`admin`, `analyst` or `viewer`) gives the role; without it, or
    /// when a token lacks the claim, the directory's role counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_claim: Option<String>,
    /// A user the directory does not know: `create` (an analyst, the default) or `refuse`.
    #[serde(default)]
    pub unknown_users: UnknownUsers,
}

/// `auth.proxy:` — which peers may name the user, and in which header.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
#[non_exhaustive]
pub struct ProxySettings {
    /// The header that names the user (`X-Forwarded-User` by default).
    #[serde(default = "default_user_header")]
    pub header: String,
    /// The proxy's addresses: IPs or CIDR ranges (`10.0.0.0/8`). A header from any other peer
    /// is ignored.
    pub trusted: Vec<String>,
    /// A user the directory does not know: `create` (an analyst, the default) or `refuse`.
    #[serde(default)]
    pub unknown_users: UnknownUsers,
}

fn default_algorithms() -> Vec<String> {
    vec!["RS256".into(), "ES256".into()]
}

fn default_user_claim() -> String {
    "preferred_username".into()
}

fn default_user_header() -> String {
    "X-Forwarded-User".into()
}

impl OidcSettings {
    /// Settings for tokens of `issuer` meant for `audience`, with the defaults; the keys come
    /// from [`OidcSettings::with_jwks_url`] or [`OidcSettings::with_jwks_file`].
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks_url: None,
            jwks_file: None,
            algorithms: default_algorithms(),
            user_claim: default_user_claim(),
            role_claim: None,
            unknown_users: UnknownUsers::default(),
        }
    }

    /// Reads the keys from `url`.
    pub fn with_jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_url = Some(url.into());
        self
    }

    /// Reads the keys from `path`.
    pub fn with_jwks_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.jwks_file = Some(path.into());
        self
    }

    /// Takes the role from `claim`.
    pub fn with_role_claim(mut self, claim: impl Into<String>) -> Self {
        self.role_claim = Some(claim.into());
        self
    }

    /// Names the user by `claim`.
    pub fn with_user_claim(mut self, claim: impl Into<String>) -> Self {
        self.user_claim = claim.into();
        self
    }

    /// Creates or refuses unknown users.
    pub fn with_unknown_users(mut self, unknown: UnknownUsers) -> Self {
        self.unknown_users = unknown;
        self
    }
}

impl ProxySettings {
    /// Believes `X-Forwarded-User` from these addresses (IPs or CIDR ranges).
    pub fn new(trusted: Vec<String>) -> Self {
        Self {
            header: default_user_header(),
            trusted,
            unknown_users: UnknownUsers::default(),
        }
    }

    /// Reads the user from `header`.
    pub fn with_header(mut self, header: impl Into<String>) -> Self {
        self.header = header.into();
        self
    }

    /// Creates or refuses unknown users.
    pub fn with_unknown_users(mut self, unknown: UnknownUsers) -> Self {
        self.unknown_users = unknown;
        self
    }
}

/// Sign-in settings that cannot work, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthSettingsError {
    /// A mode without its section (`mode: oidc` and no `oidc:`).
    #[error("auth mode `{mode}` needs an `auth.{mode}` section")]
    MissingSection {
        /// The mode.
        mode: &'static str,
    },
    /// A setting that is required is empty.
    #[error("`auth.{section}.{field}` is required and empty")]
    Missing {
        /// `oidc` or `proxy`.
        section: &'static str,
        /// The setting.
        field: &'static str,
    },
    /// A setting with a value that cannot work.
    #[error("`auth.{section}.{field}`: {reason}")]
    Invalid {
        /// `oidc` or `proxy`.
        section: &'static str,
        /// The setting.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl AuthSettings {
    /// Settings of `mode` with no sections.
    pub fn new(mode: AuthMode) -> Self {
        Self {
            mode,
            oidc: None,
            proxy: None,
        }
    }

    /// Adds the identity provider's section.
    pub fn with_oidc(mut self, oidc: OidcSettings) -> Self {
        self.oidc = Some(oidc);
        self
    }

    /// Adds the proxy's section.
    pub fn with_proxy(mut self, proxy: ProxySettings) -> Self {
        self.proxy = Some(proxy);
        self
    }
}
