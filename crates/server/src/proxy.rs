//! `--auth proxy`: a reverse proxy in front signs people in and names the user in a header;
//! the header counts only on a connection from one of the proxy's addresses, since anyone
//! else could send it too.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderName};
use ipnet::IpNet;

use crate::settings::{AuthSettingsError, ProxySettings, UnknownUsers};

/// The checked proxy settings.
#[derive(Debug, Clone)]
pub struct Proxy {
    header: HeaderName,
    /// The header as the settings spell it, for the log.
    shown: String,
    trusted: Vec<IpNet>,
    pub(crate) unknown_users: UnknownUsers,
}

impl Proxy {
    pub(crate) fn new(settings: &ProxySettings) -> Result<Self, AuthSettingsError> {
        let header = HeaderName::from_bytes(settings.header.trim().as_bytes()).map_err(|_| {
            AuthSettingsError::Invalid {
                section: "proxy",
                field: "header",
                reason: format!("{:?} is not a header name", settings.header),
            }
        })?;
        if settings.trusted.is_empty() {
            return Err(AuthSettingsError::Missing {
                section: "proxy",
                field: "trusted",
            });
        }
        let trusted = settings
            .trusted
            .iter()
            .map(|t| {
                let t = t.trim();
                t.parse::<IpNet>()
                    .or_else(|_| t.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| AuthSettingsError::Invalid {
                        section: "proxy",
                        field: "trusted",
                        reason: format!("{t:?} is neither an IP address nor a CIDR range"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            header,
            shown: settings.header.trim().to_owned(),
            trusted,
            unknown_users: settings.unknown_users,
        })
    }

    /// The user the header names, when the peer is trusted; otherwise why not.
    pub(crate) fn user(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Result<String, String> {
        let named = headers.get(&self.header);
        let Some(peer) = peer else {
            return Err("the peer's address is unknown".into());
        };
        // An IPv4 peer on a dual-stack socket arrives as ::ffff:a.b.c.d.
        let peer = match peer {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        if !self.trusted.iter().any(|net| net.contains(&peer)) {
            return Err(if named.is_some() {
                format!(
                    "{} from {peer}, which is not a trusted proxy: ignored",
                    self.shown
                )
            } else {
                format!("a request from {peer}, which is not a trusted proxy")
            });
        }
        let name = named
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| format!("the trusted proxy at {peer} sent no {}", self.shown))?;
        ba_storage::check_user_name(name)
            .map_err(|e| format!("the proxy named a bad user: {e}"))?;
        Ok(name.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_counts_from_trusted_peers_only() {
        let proxy = Proxy::new(&ProxySettings::new(vec![
            "10.1.0.0/16".into(),
            "127.0.0.1".into(),
        ]))
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-user", "alice".parse().unwrap());
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(proxy.user(ip("10.1.2.3"), &headers).as_deref(), Ok("alice"));
        assert_eq!(
            proxy.user(ip("127.0.0.1"), &headers).as_deref(),
            Ok("alice")
        );
        assert_eq!(
            proxy.user(ip("::ffff:127.0.0.1"), &headers).as_deref(),
            Ok("alice")
        );
        assert!(proxy.user(ip("10.2.0.1"), &headers).is_err());
        assert!(proxy.user(ip("127.0.0.2"), &headers).is_err());
        assert!(proxy.user(None, &headers).is_err());
        assert!(proxy.user(ip("127.0.0.1"), &HeaderMap::new()).is_err());
        headers.insert("x-forwarded-user", "../etc".parse().unwrap());
        assert!(proxy.user(ip("127.0.0.1"), &headers).is_err());
    }
}
