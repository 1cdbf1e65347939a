//! A Server-Sent Events parser (the WHATWG event-stream format), incremental and lenient.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined by `\n`.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// Incremental parser: push text as it arrives, take complete events out.
#[derive(Debug, Default)]
pub struct SseParser {
    buffer: String,
    current: SseEvent,
    has_data: bool,
}

impl SseParser {
    /// A new parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk of text; returns the events it completed.
    pub fn push(&mut self, chunk: &str) -> Vec<SseEvent> {
        self.buffer.push_str(chunk);
        let mut out = Vec::new();
        while let Some(end) = self.buffer.find('\n') {
            let line: String = self.buffer.drain(..=end).collect();
            let line = line.strip_suffix('\n').unwrap_or(&line);
            let line = line.strip_suffix('\r').unwrap_or(line);
            self.line(line, &mut out);
        }
        out
    }

    /// Ends the stream: a last event without its blank line is still dispatched.
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buffer);
        if !rest.is_empty() {
            let line = rest.strip_suffix('\r').unwrap_or(&rest).to_owned();
            self.line(&line, &mut out);
        }
        self.dispatch(&mut out);
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.current.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.current.data.push('\n');
                }
                self.current.data.push_str(value);
                self.has_data = true;
            }
            "id" => self.current.id = Some(value.to_owned()),
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(std::mem::take(&mut self.current));
        } else {
            self.current = SseEvent::default();
        }
        self.has_data = false;
    }
}

/// Parses a whole stream at once.
pub fn parse(text: &str) -> Vec<SseEvent> {
    let mut parser = SseParser::new();
    let mut events = parser.push(text);
    events.extend(parser.finish());
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_unterminated_tail() {
        let mut p = SseParser::new();
        let mut events = p.push("event: a\nda");
        assert!(events.is_empty());
        events.extend(p.push("ta: {\"x\":1}\n\n: comment\nevent: b\r\ndata: 2"));
        assert_eq!(events.len(), 1);
        events.extend(p.finish());
        assert_eq!(
            events[0],
            SseEvent {
                event: Some("a".into()),
                data: "{\"x\":1}".into(),
                id: None
            }
        );
        assert_eq!(events[1].event.as_deref(), Some("b"));
        assert_eq!(events[1].data, "2");
    }

    #[test]
    fn multi_line_data_is_joined() {
        let events = parse("data: a\ndata: b\n\n");
        assert_eq!(events[0].data, "a\nb");
    }
}
