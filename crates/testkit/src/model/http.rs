//! HTTP/1.1 for the scripted model: requests read from a connection (bounded), replies written
//! whole or as a chunked event stream, connections kept alive between requests.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Body, Response, Shared, Wire};

pub(super) struct RawRequest {
    pub(super) method: String,
    pub(super) path: String,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

impl RawRequest {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Serves the requests of one connection until the client closes it or asks to.
pub(super) async fn serve_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await else {
            return;
        };
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let path = request.path.split('?').next().unwrap_or_default();
        let wire = match (request.method.as_str(), path) {
            ("POST", p) if p.ends_with("/responses") => Some(Wire::Responses),
            ("POST", p) if p.ends_with("/chat/completions") => Some(Wire::OpenAi),
            ("POST", p) if p.ends_with("/messages") => Some(Wire::Anthropic),
            _ => None,
        };
        let embeds = request.method == "POST" && path.ends_with("/embeddings");
        let response = if embeds {
            shared.embed(&request)
        } else {
            shared.answer(wire, request)
        };
        if matches!(response.body, Body::Held) {
            // Read until the client closes (what it sends meanwhile is ignored).
            while fill(&mut stream, &mut buf).await.is_some() {}
            return;
        }
        if write_response(&mut stream, response, close).await.is_err() || close {
            let _ = stream.shutdown().await;
            return;
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Scripted",
    }
}

async fn write_response(
    stream: &mut TcpStream,
    response: Response,
    close: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        response.status,
        reason(response.status)
    );
    for (k, v) in &response.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let connection = if close { "close" } else { "keep-alive" };
    head.push_str(&format!("connection: {connection}\r\n"));
    match response.body {
        Body::Held => Ok(()),
        Body::Json(body) => {
            let body = body.to_string();
            head.push_str(&format!(
                "content-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            ));
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.flush().await
        }
        Body::Events(events) => {
            head.push_str(
                "content-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
            );
            stream.write_all(head.as_bytes()).await?;
            for event in events {
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                stream.write_all(chunk.as_bytes()).await?;
                stream.flush().await?;
                // Let the client read each event on its own.
                tokio::task::yield_now().await;
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await
        }
    }
}

/// Reads more bytes into `buf`; `None` when the connection ends.
pub(super) async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// Where `needle` starts in `buf` at or after `from`, reading more until it comes.
pub(super) async fn read_until(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    from: usize,
    needle: &[u8],
) -> Option<usize> {
    loop {
        if let Some(at) = buf
            .get(from..)
            .and_then(|tail| tail.windows(needle.len()).position(|w| w == needle))
        {
            return Some(from + at);
        }
        fill(stream, buf).await?;
    }
}

/// Reads one request (`Content-Length` or chunked body) from the front of `buf` and the
/// stream, leaving what follows it in `buf`.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<RawRequest> {
    let head_end = read_until(stream, buf, 0, b"\r\n\r\n").await?;
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut request = RawRequest {
        method,
        path,
        headers,
        body: Vec::new(),
    };
    if request
        .header("expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        stream
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .ok()?;
    }
    let chunked = request
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            let line_end = read_until(stream, buf, 0, b"\r\n").await?;
            let line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
            buf.drain(..line_end + 2);
            if size == 0 {
                // Trailers, if any, end with an empty line.
                loop {
                    let end = read_until(stream, buf, 0, b"\r\n").await?;
                    buf.drain(..end + 2);
                    if end == 0 {
                        break;
                    }
                }
                break;
            }
            while buf.len() < size + 2 {
                fill(stream, buf).await?;
            }
            request.body.extend(buf.drain(..size));
            buf.drain(..2);
        }
    } else {
        let length: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < length {
            fill(stream, buf).await?;
        }
        request.body = buf.drain(..length).collect();
    }
    Some(request)
}
