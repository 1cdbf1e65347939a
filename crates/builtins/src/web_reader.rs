//! `web_reader`: fetches a web page and returns its readable text.
//!
//! Every hop (the first URL and each redirect) is checked before a byte is sent: the scheme
//! must be http or https, and every address the host resolves to must be public unless the
//! config allows private ones. The connection is then pinned to the checked addresses, so a
//! second DNS answer cannot swap in an internal one (DNS rebinding).

use ba_tools::{CallContext, Tool, ToolCapabilities, ToolError};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ba_protocol::OutputLevel;
use reqwest::Url;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::BuiltinError;
use super::html::html_to_markdown;

/// The tool name.
pub const NAME: &str = "web_reader";

/// The description shown to the model.
pub const DESCRIPTION: &str = "Read a web page (http or https) and return its title and \
    main content as Markdown (headings, lists, tables, links).";

/// Arguments of `web_reader`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebReaderArgs {
    /// The page URL (http or https).
    pub url: String,
    /// How detailed the answer should be: brief, standard or full.
    #[serde(default)]
    pub response_format: OutputLevel,
}

/// What `web_reader` may fetch and how much.
#[derive(Debug, Clone)]
pub struct WebReaderConfig {
    /// Allow loopback, private, link-local and other non-public addresses (tests, intranets).
    pub allow_private: bool,
    /// The most body bytes read; the rest is cut and the result marked truncated.
    pub max_bytes: usize,
    /// Timeout of the whole fetch, redirects included.
    pub timeout: Duration,
    /// The most redirects followed.
    pub max_redirects: usize,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Default for WebReaderConfig {
    fn default() -> Self {
        Self {
            allow_private: false,
            max_bytes: 2 * 1024 * 1024,
            timeout: Duration::from_secs(30),
            max_redirects: 5,
            user_agent: concat!("ba-agent/", env!("CARGO_PKG_VERSION")).to_owned(),
        }
    }
}

/// The `web_reader` tool.
#[derive(Debug, Clone, Default)]
pub struct WebReader {
    config: WebReaderConfig,
}

impl WebReader {
    /// A reader with `config`.
    pub fn new(config: WebReaderConfig) -> Self {
        Self { config }
    }

    /// The JSON Schema of the arguments.
    pub fn schema() -> Value {
        super::args_schema::<WebReaderArgs>()
    }

    /// Parses `args` and runs.
    pub async fn call_json(&self, args: Value) -> Result<Value, BuiltinError> {
        self.run(super::parse_args(NAME, args)?).await
    }

    /// Fetches the page and returns `url` (after redirects), `status`, `content_type`,
    /// `title`, `text` and `truncated`.
    pub async fn run(&self, args: WebReaderArgs) -> Result<Value, BuiltinError> {
        let seconds = self.config.timeout.as_secs().max(1);
        tokio::time::timeout(self.config.timeout, self.fetch(&args.url))
            .await
            .unwrap_or(Err(BuiltinError::Timeout {
                tool: NAME,
                seconds,
            }))
    }

    async fn fetch(&self, raw: &str) -> Result<Value, BuiltinError> {
        let mut url =
            Url::parse(raw).map_err(|err| refused(raw, &format!("not a valid URL: {err}")))?;
        let mut hops = 0;
        loop {
            let client = self.client_for(&url).await?;
            let response = client
                .get(url.clone())
                .send()
                .await
                .map_err(|err| http_error(url.as_str(), &err))?;
            let status = response.status();
            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .ok_or_else(|| BuiltinError::Http {
                        url: url.to_string(),
                        message: format!("status {status} without a Location header"),
                        retryable: false,
                    })?;
                let next = url.join(location).map_err(|err| {
                    refused(
                        location,
                        &format!("redirect target is not a valid URL: {err}"),
                    )
                })?;
                hops += 1;
                if hops > self.config.max_redirects {
                    return Err(BuiltinError::Http {
                        url: url.to_string(),
                        message: format!("more than {} redirects", self.config.max_redirects),
                        retryable: false,
                    });
                }
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(BuiltinError::Http {
                    url: url.to_string(),
                    message: format!("the server answered {status}"),
                    retryable: status.as_u16() == 429 || status.is_server_error(),
                });
            }
            return self.read_page(url, response).await;
        }
    }

    /// A client that connects only to the checked addresses of `url`'s host.
    async fn client_for(&self, url: &Url) -> Result<reqwest::Client, BuiltinError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refused(
                url.as_str(),
                &format!(
                    "scheme `{}` is not allowed; only http and https",
                    url.scheme()
                ),
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| refused(url.as_str(), "the URL has no host"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|err| BuiltinError::Http {
                    url: url.to_string(),
                    message: format!("cannot resolve host `{bare}`: {err}"),
                    retryable: true,
                })?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(BuiltinError::Http {
                url: url.to_string(),
                message: format!("host `{bare}` has no addresses"),
                retryable: true,
            });
        }
        if !self.config.allow_private
            && let Some(bad) = addrs.iter().find(|a| !is_public(a.ip()))
        {
            return Err(refused(
                url.as_str(),
                &format!(
                    "it points to the non-public address {} (loopback, private, link-local and \
                     metadata addresses are blocked)",
                    bad.ip()
                ),
            ));
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(self.config.user_agent.clone())
            .connect_timeout(self.config.timeout);
        if bare.parse::<IpAddr>().is_err() {
            builder = builder.resolve_to_addrs(bare, &addrs);
        }
        builder.build().map_err(|err| BuiltinError::Environment {
            tool: NAME,
            message: format!("cannot build the HTTP client: {err}"),
        })
    }

    async fn read_page(
        &self,
        url: Url,
        mut response: reqwest::Response,
    ) -> Result<Value, BuiltinError> {
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let mime = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let is_html = mime.is_empty() || mime == "text/html" || mime == "application/xhtml+xml";
        let is_text = mime.starts_with("text/") || mime.ends_with("json") || mime.ends_with("xml");
        if !is_html && !is_text {
            return Err(BuiltinError::Http {
                url: url.to_string(),
                message: format!("content type `{mime}` is not text"),
                retryable: false,
            });
        }
        let mut body = Vec::new();
        let mut truncated = false;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| http_error(url.as_str(), &err))?
        {
            let room = self.config.max_bytes.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        // A page is shown whatever its bytes: a BOM, else the declared charset, else UTF-8,
        // with bad sequences replaced (the browser's rule, not the strict one of file_reader).
        let charset = content_type
            .split(';')
            .filter_map(|p| p.trim().strip_prefix("charset="))
            .next()
            .map(|c| c.trim_matches('"'))
            .and_then(|c| encoding_rs::Encoding::for_label(c.as_bytes()))
            .unwrap_or(encoding_rs::UTF_8);
        let (decoded, _, _) = charset.decode(&body);
        let (title, text) = if is_html {
            html_to_markdown(&decoded, Some(&url))
        } else {
            (None, decoded.into_owned())
        };
        Ok(json!({
            "url": url.to_string(),
            "status": status,
            "content_type": mime,
            "title": title,
            "text": text,
            "bytes": body.len(),
            "truncated": truncated,
        }))
    }
}

fn refused(url: &str, reason: &str) -> BuiltinError {
    BuiltinError::UrlRefused {
        url: url.to_owned(),
        reason: reason.to_owned(),
    }
}

fn http_error(url: &str, err: &reqwest::Error) -> BuiltinError {
    BuiltinError::Http {
        url: url.to_owned(),
        message: err.to_string(),
        retryable: err.is_connect() || err.is_timeout(),
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local (which holds the
/// cloud metadata service at 169.254.169.254), shared (CGNAT), unspecified, broadcast,
/// multicast, documentation, or an IPv6 form of one of those.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        || first == 0x2001 && ip.segments()[1] == 0x0db8
        // IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) forms embed an IPv4 address.
        || ip.segments()[..6] == [0, 0, 0, 0, 0, 0]
        || ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0])
}

#[async_trait::async_trait]
impl Tool for WebReader {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        DESCRIPTION
    }

    fn input_schema(&self) -> Value {
        Self::schema()
    }

    async fn call(&self, input: Value, _ctx: &CallContext) -> Result<Value, ToolError> {
        Ok(self.call_json(input).await?)
    }

    fn capabilities(&self) -> ToolCapabilities {
        // A page may change between two reads, and fetching reaches outside: the defaults.
        ToolCapabilities::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A one-page-per-connection HTTP server on 127.0.0.1: `/page` is HTML, `/hop` redirects to
    /// `/page`, `/away` redirects to `target`, `/big` is large, `/bin` is binary.
    async fn serve(target: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let n = sock.read(&mut buf).await.unwrap_or(0);
                    let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                    let path = req.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let (head, body) = match path.as_str() {
                        "/page" => (
                            "200 OK\r\nContent-Type: text/html; charset=utf-8".to_owned(),
                            "<html><head><title>Q3 report</title><script>x()</script></head>\
                             <body><h1>West</h1><p>Sales grew&nbsp;42&#37;.</p></body></html>"
                                .to_owned(),
                        ),
                        "/hop" => ("302 Found\r\nLocation: /page".to_owned(), String::new()),
                        "/away" => (format!("302 Found\r\nLocation: {target}"), String::new()),
                        "/big" => (
                            "200 OK\r\nContent-Type: text/plain".to_owned(),
                            "a".repeat(10_000),
                        ),
                        "/bin" => (
                            "200 OK\r\nContent-Type: image/png".to_owned(),
                            "PNG".to_owned(),
                        ),
                        _ => (
                            "404 Not Found\r\nContent-Type: text/plain".to_owned(),
                            "no".into(),
                        ),
                    };
                    let reply = format!(
                        "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        addr
    }

    fn loopback_allowed() -> WebReader {
        WebReader::new(WebReaderConfig {
            allow_private: true,
            max_bytes: 1000,
            ..WebReaderConfig::default()
        })
    }

    #[tokio::test]
    async fn reads_a_page_and_follows_redirects() {
        let addr = serve("http://127.0.0.1:1/").await;
        let tool = loopback_allowed();
        let out = tool
            .call_json(json!({"url": format!("http://{addr}/hop")}))
            .await
            .unwrap();
        assert_eq!(out["url"], format!("http://{addr}/page"));
        assert_eq!(out["title"], "Q3 report");
        assert_eq!(out["text"], "# West\n\nSales grew 42%.");
        let out = tool
            .call_json(json!({"url": format!("http://localhost:{}/big", addr.port())}))
            .await
            .unwrap();
        assert_eq!(out["truncated"], true);
        assert_eq!(out["bytes"], 1000);
        let err = tool
            .call_json(json!({"url": format!("http://{addr}/bin")}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not text"), "{err}");
        let err = tool
            .call_json(json!({"url": format!("http://{addr}/missing")}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("404"), "{err}");
    }

    #[tokio::test]
    async fn private_addresses_and_other_schemes_are_refused_by_default() {
        let addr = serve("http://127.0.0.1:1/").await;
        let tool = WebReader::default();
        for url in [
            format!("http://{addr}/page"),
            format!("http://localhost:{}/page", addr.port()),
            "http://10.0.0.1/".to_owned(),
            "http://172.16.5.4/".to_owned(),
            "http://192.168.1.1/".to_owned(),
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "http://0.0.0.0/".to_owned(),
            "http://[::1]/".to_owned(),
            "http://[fd00::1]/".to_owned(),
            "http://[fe80::1]/".to_owned(),
            "http://[::ffff:127.0.0.1]/".to_owned(),
            "file:///etc/passwd".to_owned(),
            "ftp://example.com/".to_owned(),
            "not a url".to_owned(),
        ] {
            let err = tool.call_json(json!({"url": url})).await.unwrap_err();
            assert!(
                matches!(err, BuiltinError::UrlRefused { .. }),
                "{url}: {err}"
            );
            assert_eq!(err.kind(), ba_protocol::ToolErrorKind::PermissionDenied);
        }
    }

    #[tokio::test]
    async fn redirects_are_checked_again() {
        let addr = serve("file:///etc/passwd").await;
        let tool = loopback_allowed();
        let err = tool
            .call_json(json!({"url": format!("http://{addr}/away")}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("scheme `file`"), "{err}");
    }

    #[test]
    fn public_addresses_pass() {
        for ip in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["100.64.0.1", "127.5.5.5", "::", "ff02::1", "64:ff9b::a00:1"] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }
}
