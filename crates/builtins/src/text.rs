//! Small text codecs shared by the tools: byte decoding, CSV records and HTML to plain text.
//!
//! They are written here rather than pulled in as crates because each is a few dozen lines and
//! the tools need only the common cases (see each function for what is and is not handled).

/// A text encoding `file_reader` can decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// UTF-8; a leading byte-order mark is dropped.
    Utf8,
    /// ISO-8859-1: every byte is the code point of the same value.
    Latin1,
    /// Windows-1252: Latin-1 with printable characters in 0x80–0x9F.
    Windows1252,
}

impl Encoding {
    /// The encoding for a label such as `utf-8`, `latin-1`, `iso-8859-1` or `cp1252`.
    pub fn from_label(label: &str) -> Option<Self> {
        let norm: String = label
            .trim()
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        match norm.as_str() {
            "utf8" | "utf8sig" => Some(Self::Utf8),
            "latin1" | "iso88591" | "l1" => Some(Self::Latin1),
            "windows1252" | "cp1252" => Some(Self::Windows1252),
            _ => None,
        }
    }

    /// The canonical label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Utf8 => "utf-8",
            Self::Latin1 => "latin-1",
            Self::Windows1252 => "windows-1252",
        }
    }

    /// Decodes `bytes`. UTF-8 errors report the byte offset of the first bad sequence.
    pub fn decode(self, bytes: &[u8]) -> Result<String, String> {
        match self {
            Self::Utf8 => {
                let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
                String::from_utf8(bytes.to_vec()).map_err(|err| {
                    format!(
                        "invalid UTF-8 at byte {}; try encoding \"latin-1\" or \"windows-1252\"",
                        err.utf8_error().valid_up_to()
                    )
                })
            }
            Self::Latin1 => Ok(bytes.iter().map(|&b| char::from(b)).collect()),
            Self::Windows1252 => Ok(bytes.iter().map(|&b| windows_1252_char(b)).collect()),
        }
    }
}

/// The 0x80–0x9F block of Windows-1252; the five undefined bytes map to their C1 controls, as
/// the WHATWG decoder does.
const CP1252_HIGH: [char; 32] = [
    '€', '\u{81}', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', '\u{8D}', 'Ž', '\u{8F}',
    '\u{90}', '‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', '\u{9D}', 'ž', 'Ÿ',
];

fn windows_1252_char(b: u8) -> char {
    if (0x80..0xA0).contains(&b) {
        CP1252_HIGH[usize::from(b - 0x80)]
    } else {
        char::from(b)
    }
}

/// A CSV syntax error: an unterminated quoted field or text after a closing quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvError {
    /// 1-based line where the problem was found.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

/// Parses RFC 4180 CSV: comma-separated, fields optionally in double quotes, `""` for a quote
/// inside a quoted field, quoted fields may hold commas and newlines, CRLF or LF line ends.
/// Blank lines are skipped. Records may have different lengths; the caller decides.
pub fn parse_csv(text: &str) -> Result<Vec<Vec<String>>, CsvError> {
    let mut records = Vec::new();
    let mut record: Vec<String> = Vec::new();
    let mut field = String::new();
    let mut chars = text.chars().peekable();
    let mut line = 1usize;
    let mut quoted_since: Option<usize> = None;
    // Whether the current field was quoted, so `""` as a whole field is an empty value and not
    // "no field at all" when deciding whether a line was blank.
    let mut field_was_quoted = false;
    while let Some(c) = chars.next() {
        if let Some(start) = quoted_since {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => {
                    quoted_since = None;
                    match chars.peek() {
                        None | Some(',' | '\n' | '\r') => {}
                        Some(other) => {
                            return Err(CsvError {
                                line,
                                message: format!(
                                    "unexpected {other:?} after the closing quote of a field \
                                     opened on line {start}"
                                ),
                            });
                        }
                    }
                }
                '\n' => {
                    line += 1;
                    field.push('\n');
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.is_empty() && !field_was_quoted => {
                quoted_since = Some(line);
                field_was_quoted = true;
            }
            ',' => {
                record.push(std::mem::take(&mut field));
                field_was_quoted = false;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => {
                line += 1;
                end_record(&mut records, &mut record, &mut field, field_was_quoted);
                field_was_quoted = false;
            }
            _ => field.push(c),
        }
    }
    if let Some(start) = quoted_since {
        return Err(CsvError {
            line: start,
            message: format!("quoted field opened on line {start} is never closed"),
        });
    }
    end_record(&mut records, &mut record, &mut field, field_was_quoted);
    Ok(records)
}

fn end_record(
    records: &mut Vec<Vec<String>>,
    record: &mut Vec<String>,
    field: &mut String,
    field_was_quoted: bool,
) {
    if record.is_empty() && field.is_empty() && !field_was_quoted {
        return;
    }
    record.push(std::mem::take(field));
    records.push(std::mem::take(record));
}

/// Elements whose content is not text a reader wants.
const SKIPPED: [&str; 7] = [
    "script", "style", "noscript", "template", "svg", "iframe", "head",
];

/// Elements that start a new line.
const BLOCKS: [&str; 31] = [
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tr",
    "ul",
];

/// The readable text of an HTML page, and its `<title>` if any.
///
/// Scripts, styles and the head are dropped, block elements become line breaks, list items get
/// a `- ` marker, table cells are separated by ` | `, entities are decoded and runs of spaces
/// collapsed. It is a reader's view, not a DOM: malformed markup degrades to more text, never
/// to an error.
pub fn html_to_text(html: &str) -> (Option<String>, String) {
    let title = extract_title(html);
    let mut out = String::with_capacity(html.len() / 2);
    let mut rest = html;
    while let Some(lt) = rest.find('<') {
        push_text(&mut out, &rest[..lt]);
        rest = &rest[lt..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        // As in browsers, `<` starts a tag only before a letter, `/` or `!`, and a tag ends at
        // the first `>`; otherwise it is text (`a < b`, `<<script>`).
        let starts_tag = rest[1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!');
        let gt = rest.find('>');
        let next_lt = rest[1..].find('<').map(|i| i + 1);
        let Some(gt) = gt.filter(|&gt| starts_tag && next_lt.is_none_or(|lt| gt < lt)) else {
            push_text(&mut out, "<");
            rest = &rest[1..];
            continue;
        };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .flat_map(|c| c.to_lowercase())
            .collect();
        if name.is_empty() {
            continue;
        }
        if !closing && SKIPPED.contains(&name.as_str()) && !tag.ends_with('/') {
            rest = skip_element(rest, &name);
            continue;
        }
        match name.as_str() {
            "li" if !closing => out.push_str("\n- "),
            "td" | "th" if closing => out.push_str(" | "),
            n if BLOCKS.contains(&n) => out.push('\n'),
            _ => {}
        }
    }
    push_text(&mut out, rest);
    (title, tidy(&out))
}

fn extract_title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title")?;
    let title = collapse_spaces(&decode_entities(&html[open_end..close]));
    (!title.is_empty()).then_some(title)
}

/// The rest of the document after the closing tag of `name`.
fn skip_element<'a>(rest: &'a str, name: &str) -> &'a str {
    let lower = rest.to_ascii_lowercase();
    let closing = format!("</{name}");
    match lower.find(&closing) {
        Some(at) => {
            let after = &rest[at..];
            after.find('>').map_or("", |gt| &after[gt + 1..])
        }
        None => "",
    }
}

fn push_text(out: &mut String, raw: &str) {
    if raw.is_empty() {
        return;
    }
    let decoded = decode_entities(raw);
    for c in decoded.chars() {
        let c = if c.is_whitespace() || c == '\u{a0}' {
            ' '
        } else {
            c
        };
        if c == ' ' && (out.ends_with(' ') || out.ends_with('\n') || out.is_empty()) {
            continue;
        }
        out.push(c);
    }
}

fn collapse_spaces(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trims each line and drops empty ones: nested blocks would otherwise leave runs of blank
/// lines that cost tokens and say nothing.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_suffix(" |").unwrap_or(line).trim_end();
        if line.is_empty() || line == "-" {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
    }
    out
}

/// Decodes the common named entities and all numeric ones; unknown entities stay as written.
pub fn decode_entities(s: &str) -> String {
    if !s.contains('&') {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest
            .char_indices()
            .take(12)
            .find(|&(_, c)| c == ';')
            .map(|(i, _)| i);
        let decoded = end.and_then(|end| entity(&rest[1..end]).map(|c| (c, end)));
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => '\u{a0}',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "middot" => '·',
        "bull" => '•',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "deg" => '°',
        "times" => '×',
        "divide" => '÷',
        "plusmn" => '±',
        "para" => '¶',
        "sect" => '§',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_handles_quotes_commas_and_newlines() {
        let text = "a,b,c\r\n1,\"x, y\",\"say \"\"hi\"\"\"\n2,\"two\nlines\",\n\n3,,\"\"\n";
        let rows = parse_csv(text).unwrap();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[1], vec!["1", "x, y", "say \"hi\""]);
        assert_eq!(rows[2], vec!["2", "two\nlines", ""]);
        assert_eq!(rows[3], vec!["3", "", ""]);
    }

    #[test]
    fn csv_reports_unterminated_quote_with_its_line() {
        let err = parse_csv("a,b\n1,\"open\n2,3\n").unwrap_err();
        assert_eq!(err.line, 2);
        let err = parse_csv("a\n\"x\"y\n").unwrap_err();
        assert!(err.message.contains("after the closing quote"), "{err:?}");
    }

    #[test]
    fn encodings_decode_the_high_bytes() {
        assert_eq!(Encoding::Latin1.decode(b"caf\xe9").unwrap(), "café");
        assert_eq!(Encoding::Windows1252.decode(b"\x80 5").unwrap(), "€ 5");
        assert_eq!(Encoding::Utf8.decode(b"\xEF\xBB\xBFok").unwrap(), "ok");
        assert!(
            Encoding::Utf8
                .decode(b"caf\xe9")
                .unwrap_err()
                .contains("byte 3")
        );
        assert_eq!(Encoding::from_label("ISO-8859-1"), Some(Encoding::Latin1));
        assert_eq!(Encoding::from_label("gbk"), None);
    }

    #[test]
    fn html_becomes_readable_text() {
        let html = "<html><head><title>Q3 &amp; more</title><style>p{}</style></head><body>\
            <script>var x = '<p>';</script><h1>Sales</h1><p>West grew&nbsp;42%.</p>\
            <ul><li>one</li><li>two &#x263A;</li></ul><!-- hidden --><table><tr><td>a</td>\
            <td>b</td></tr></table></body></html>";
        let (title, text) = html_to_text(html);
        assert_eq!(title.as_deref(), Some("Q3 & more"));
        assert_eq!(text, "Sales\nWest grew 42%.\n- one\n- two ☺\na | b");
    }

    #[test]
    fn unknown_entities_stay() {
        assert_eq!(
            decode_entities("a &bogus; b &lt; c & d"),
            "a &bogus; b < c & d"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn encode(records: &[Vec<String>]) -> String {
            let mut out = String::new();
            for record in records {
                let fields: Vec<String> = record
                    .iter()
                    .map(|f| format!("\"{}\"", f.replace('"', "\"\"")))
                    .collect();
                out.push_str(&fields.join(","));
                out.push_str("\r\n");
            }
            out
        }

        proptest! {
            #[test]
            fn csv_round_trips_any_quoted_records(
                records in prop::collection::vec(
                    prop::collection::vec("[a-z,\"\n\r é]{0,8}", 1..5), 0..6)
            ) {
                let parsed = parse_csv(&encode(&records)).unwrap();
                prop_assert_eq!(parsed, records);
            }

            #[test]
            fn csv_never_panics(text in "[a-z,\"\n\r]{0,40}") {
                let _ = parse_csv(&text);
            }

            #[test]
            fn html_to_text_never_panics_and_drops_scripts(
                html in "[<>/a-z &;#x0-9é\"=!-]{0,80}"
            ) {
                let doc = format!("{html}<script>SECRET</script>{html}");
                let (_, text) = html_to_text(&doc);
                prop_assert!(!text.contains("SECRET"));
            }
        }
    }
}
