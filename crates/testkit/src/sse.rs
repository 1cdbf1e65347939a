//! Server-sent events as a test client reads them: frames cut out of the response's chunks.

/// One frame: its `id`, `event` and `data` fields (data lines joined with `\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Cuts frames out of a byte stream. Bytes wait until their frame's blank line has come, so a
/// character split between two chunks is decoded whole.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Adds a chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next whole frame that carries data; blocks without data (keep-alive comments)
    /// are skipped. `None` until more bytes come.
    pub fn next_frame(&mut self) -> Option<SseFrame> {
        loop {
            let end = self.buf.windows(2).position(|w| w == b"\n\n")?;
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let block = String::from_utf8(block).expect("an SSE frame is UTF-8");
            let mut frame = SseFrame {
                id: None,
                event: None,
                data: String::new(),
            };
            let mut data: Vec<&str> = Vec::new();
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => frame.id = Some(value.to_owned()),
                    "event" => frame.event = Some(value.to_owned()),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            if !data.is_empty() {
                frame.data = data.join("\n");
                return Some(frame);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_cut_whole_across_chunks() {
        let body = ": keep-alive\n\nid: 3\nevent: entry\ndata: {\"t\":\"café\"}\n\n\
                    event: two\ndata: a\ndata: b\n\n"
            .as_bytes();
        // Split inside the two bytes of `é`.
        let cut = body.iter().position(|&b| b == 0xC3).unwrap() + 1;
        let mut p = SseParser::default();
        p.push(&body[..cut]);
        assert_eq!(p.next_frame(), None);
        p.push(&body[cut..]);
        assert_eq!(
            p.next_frame(),
            Some(SseFrame {
                id: Some("3".into()),
                event: Some("entry".into()),
                data: "{\"t\":\"café\"}".into(),
            })
        );
        let two = p.next_frame().unwrap();
        assert_eq!((two.id, two.data.as_str()), (None, "a\nb"));
        assert_eq!(p.next_frame(), None);
    }
}
