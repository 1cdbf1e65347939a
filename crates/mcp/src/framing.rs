//! A bound on the size of one message a stdio server sends.
//!
//! MCP over stdio is one JSON-RPC message a line. rmcp drops a line over its limit and logs it,
//! so the request it answered would end only by timeout. [`LimitedLines`] sits between the
//! child's stdout and rmcp: lines within the limit pass through untouched; a longer line is cut
//! (the part already passed on is ended with a newline, which rmcp then ignores as unparsable),
//! the rest is skipped without being stored, and when the line was a response whose `id` can be
//! read from its first or last bytes, a JSON-RPC error response with that id takes its place —
//! so the call fails at once with the size in its message.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

/// JSON-RPC's code for a request whose parameters the server refused.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// The JSON-RPC error code of the stand-in response (implementation-defined range).
pub(crate) const REPLY_TOO_LARGE_CODE: i64 = -32090;
/// The marker in the stand-in response's `data`.
pub(crate) const REPLY_TOO_LARGE_MARK: &str = "ba_mcp_reply_too_large";

const READ_BUF: usize = 64 * 1024;
const HEAD: usize = 4096;
const TAIL: usize = 256;

/// What the reader saw of oversized lines, shared with the manager.
#[derive(Debug, Default)]
pub(crate) struct OversizeLog {
    count: AtomicU64,
    last_bytes: AtomicU64,
}

impl OversizeLog {
    /// Oversized lines so far.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// The size of the last one.
    pub(crate) fn last_bytes(&self) -> u64 {
        self.last_bytes.load(Ordering::Acquire)
    }
}

/// An [`AsyncRead`] passing through lines of at most `max` bytes (see the module docs).
pub(crate) struct LimitedLines<R> {
    inner: R,
    max: usize,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    line_len: u64,
    head: Vec<u8>,
    tail: Vec<u8>,
    discarding: bool,
    pending: Vec<u8>,
    pending_pos: usize,
    log: Arc<OversizeLog>,
}

impl<R> LimitedLines<R> {
    pub(crate) fn new(inner: R, max: usize, log: Arc<OversizeLog>) -> Self {
        Self {
            inner,
            max,
            buf: vec![0; READ_BUF].into_boxed_slice(),
            start: 0,
            end: 0,
            line_len: 0,
            head: Vec::with_capacity(HEAD),
            tail: Vec::with_capacity(TAIL * 2),
            discarding: false,
            pending: Vec::new(),
            pending_pos: 0,
            log,
        }
    }

    fn end_line(&mut self) {
        self.line_len = 0;
        self.head.clear();
        self.tail.clear();
    }

    fn finish_oversized(&mut self) {
        let bytes = self.line_len;
        self.log.count.fetch_add(1, Ordering::AcqRel);
        self.log.last_bytes.store(bytes, Ordering::Release);
        let info = scan_head(&self.head);
        let tail_start = self.tail.len().saturating_sub(TAIL);
        let id = info.id.or_else(|| tail_id(&self.tail[tail_start..]));
        tracing::warn!(
            bytes,
            limit = self.max,
            ?id,
            "discarded an oversized message from an MCP server"
        );
        if let (false, true, Some(id)) = (info.has_method, info.is_response, id) {
            let stand_in = json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": REPLY_TOO_LARGE_CODE,
                    "message": format!("reply of {bytes} bytes over the {}-byte limit", self.max),
                    "data": {REPLY_TOO_LARGE_MARK: true, "bytes": bytes, "limit": self.max},
                },
            });
            self.pending
                .extend_from_slice(stand_in.to_string().as_bytes());
            self.pending.push(b'\n');
        }
        self.discarding = false;
        self.end_line();
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LimitedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.pending_pos < this.pending.len() {
                let n = out.remaining().min(this.pending.len() - this.pending_pos);
                out.put_slice(&this.pending[this.pending_pos..this.pending_pos + n]);
                this.pending_pos += n;
                if this.pending_pos == this.pending.len() {
                    this.pending.clear();
                    this.pending_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.start == this.end {
                let mut rb = ReadBuf::new(&mut this.buf);
                match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Ready(Ok(())) => {
                        let n = rb.filled().len();
                        if n == 0 {
                            return Poll::Ready(Ok(()));
                        }
                        this.start = 0;
                        this.end = n;
                    }
                }
            }
            let (start, end) = (this.start, this.end);
            let newline = this.buf[start..end].iter().position(|&b| b == b'\n');
            let content_len = newline.unwrap_or(end - start);
            if this.discarding {
                remember(
                    &mut this.head,
                    &mut this.tail,
                    &this.buf[start..start + content_len],
                );
                this.line_len += content_len as u64;
                this.start += content_len;
                if newline.is_some() {
                    this.start += 1;
                    this.finish_oversized();
                }
                continue;
            }
            if this.line_len + content_len as u64 > this.max as u64 {
                // End what rmcp already has of this line; it will not parse and is ignored.
                if this.line_len > 0 {
                    this.pending.push(b'\n');
                }
                this.discarding = true;
                continue;
            }
            if out.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            let with_newline = content_len + usize::from(newline.is_some());
            let n = out.remaining().min(with_newline);
            out.put_slice(&this.buf[start..start + n]);
            let content_passed = n.min(content_len);
            remember(
                &mut this.head,
                &mut this.tail,
                &this.buf[start..start + content_passed],
            );
            this.line_len += content_passed as u64;
            this.start += n;
            if n == with_newline && newline.is_some() {
                this.end_line();
            }
            return Poll::Ready(Ok(()));
        }
    }
}

/// Keeps the first [`HEAD`] and the last [`TAIL`] bytes of the current line.
fn remember(head: &mut Vec<u8>, tail: &mut Vec<u8>, content: &[u8]) {
    if head.len() < HEAD {
        let take = content.len().min(HEAD - head.len());
        head.extend_from_slice(&content[..take]);
    }
    let from = content.len().saturating_sub(TAIL);
    tail.extend_from_slice(&content[from..]);
    if tail.len() > TAIL * 2 {
        tail.drain(..tail.len() - TAIL);
    }
}

/// What the first bytes of a message say about it.
#[derive(Debug, Default, PartialEq)]
struct HeadInfo {
    id: Option<Value>,
    has_method: bool,
    is_response: bool,
}

/// Reads the top-level keys in the first bytes of a JSON object: its `id` (a number or a plain
/// string) and whether it is a request (`method`) or a response (`result`, `error`).
fn scan_head(head: &[u8]) -> HeadInfo {
    let mut info = HeadInfo::default();
    let mut depth = 0usize;
    let mut i = 0;
    let mut expect_key = false;
    while i < head.len() {
        let b = head[i];
        match b {
            b'"' => {
                let Some(end) = string_end(head, i + 1) else {
                    return info;
                };
                if depth == 1 && expect_key {
                    let key = &head[i + 1..end];
                    expect_key = false;
                    match key {
                        b"method" => info.has_method = true,
                        b"result" | b"error" => info.is_response = true,
                        b"id" => info.id = scalar_after_colon(head, end + 1),
                        _ => {}
                    }
                }
                i = end + 1;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1 && b == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            _ => {}
        }
        i += 1;
    }
    info
}

/// The index of the quote ending a string whose content starts at `from`.
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn scalar_after_colon(bytes: &[u8], from: usize) -> Option<Value> {
    let mut i = from;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    while i < bytes.len() && bytes[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    if bytes.get(i) == Some(&b'"') {
        let end = string_end(bytes, i + 1)?;
        return serde_json::from_slice(&bytes[start..=end]).ok();
    }
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'-') {
        i += 1;
    }
    if i == start || i == bytes.len() {
        return None;
    }
    serde_json::from_slice(&bytes[start..i]).ok()
}

/// The `id` of a message whose last member is `"id": …`, read backwards from its last bytes:
/// the final `}` closes the top-level object, so the member just before it is a top-level one.
fn tail_id(tail: &[u8]) -> Option<Value> {
    let mut end = tail.len();
    let trim = |end: &mut usize| {
        while *end > 0 && tail[*end - 1].is_ascii_whitespace() {
            *end -= 1;
        }
    };
    trim(&mut end);
    if end == 0 || tail[end - 1] != b'}' {
        return None;
    }
    end -= 1;
    trim(&mut end);
    let value_end = end;
    let value_start = if end > 0 && tail[end - 1] == b'"' {
        let mut i = end - 1;
        loop {
            if i == 0 {
                return None;
            }
            i -= 1;
            match tail[i] {
                b'"' => break,
                b'\\' => return None,
                _ => {}
            }
        }
        i
    } else {
        let mut i = end;
        while i > 0 && (tail[i - 1].is_ascii_digit() || tail[i - 1] == b'-') {
            i -= 1;
        }
        if i == end {
            return None;
        }
        i
    };
    let mut i = value_start;
    while i > 0 && tail[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i == 0 || tail[i - 1] != b':' {
        return None;
    }
    i -= 1;
    while i > 0 && tail[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i < 4 || &tail[i - 4..i] != b"\"id\"" {
        return None;
    }
    let before = tail[..i - 4]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace());
    if !matches!(before, Some(b',' | b'{')) {
        return None;
    }
    serde_json::from_slice(&tail[value_start..value_end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[test]
    fn head_and_tail_ids() {
        let h = scan_head(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"id":1,"#);
        assert_eq!(
            h,
            HeadInfo {
                id: Some(json!(7)),
                has_method: false,
                is_response: true
            }
        );
        let h = scan_head(br#"{ "jsonrpc" : "2.0", "id" : "a\"b", "method": "x", "params": {"#);
        assert_eq!(h.id, Some(json!("a\"b")));
        assert!(h.has_method);
        let h = scan_head(br#"{"result":{"id":3,"content":"xxxx"#);
        assert_eq!(
            h,
            HeadInfo {
                id: None,
                has_method: false,
                is_response: true
            }
        );
        assert_eq!(
            tail_id(br#"xx"}]},"jsonrpc":"2.0","id":12}"#),
            Some(json!(12))
        );
        assert_eq!(tail_id(b"xx\"}, \"id\" : \"r-1\" }\n"), Some(json!("r-1")));
        assert_eq!(tail_id(br#"xx","inner":{"id":4}}"#), None);
        assert_eq!(tail_id(br#"xx","uuid":4}"#), None);
        assert_eq!(tail_id(br#"x"#), None);
    }

    async fn read_all(input: Vec<u8>, max: usize) -> (Vec<u8>, Arc<OversizeLog>) {
        let log = Arc::new(OversizeLog::default());
        let mut reader = LimitedLines::new(std::io::Cursor::new(input), max, log.clone());
        let mut out = Vec::new();
        reader.read_to_end(&mut out).await.unwrap();
        (out, log)
    }

    #[tokio::test]
    async fn short_lines_pass_untouched() {
        let input = b"{\"a\":1}\nlog line\n\n{\"b\":2}".to_vec();
        let (out, log) = read_all(input.clone(), 16).await;
        assert_eq!(out, input);
        assert_eq!(log.count(), 0);
    }

    #[tokio::test]
    async fn long_responses_become_errors_with_their_id() {
        let big = "x".repeat(200_000);
        let mut input = Vec::new();
        input.extend_from_slice(b"{\"ok\":1}\n");
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":\"{big}\"}}\n").as_bytes(),
        );
        input.extend_from_slice(
            format!("{{\"result\":\"{big}\",\"jsonrpc\":\"2.0\",\"id\":\"s\"}}\n").as_bytes(),
        );
        input.extend_from_slice(
            format!("{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"params\":\"{big}\"}}\n")
                .as_bytes(),
        );
        input.extend_from_slice(b"{\"after\":2}\n");
        let (out, log) = read_all(input, 100_000).await;
        let text = String::from_utf8(out).unwrap();
        let parsed: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        assert_eq!(parsed.len(), 4, "{}", &text[..200]);
        assert_eq!(parsed[0], json!({"ok": 1}));
        assert_eq!(parsed[1]["id"], json!(5));
        assert_eq!(parsed[1]["error"]["code"], json!(REPLY_TOO_LARGE_CODE));
        assert_eq!(parsed[1]["error"]["data"]["bytes"], json!(200_036));
        assert_eq!(parsed[2]["id"], json!("s"));
        assert_eq!(parsed[3], json!({"after": 2}));
        assert_eq!(log.count(), 3);
        // Nothing longer than the limit reaches rmcp.
        assert!(text.lines().all(|l| l.len() <= 100_000));
    }
}
