//! Text encodings through `encoding_rs`: choosing the encoding of a file (a byte-order mark
//! wins, then the caller's label; without one, UTF-8, a configured fallback, then GBK when the
//! bytes read as Chinese text) and decoding it as a stream, whole or in part, with undecodable
//! bytes reported by their offset (and the encodings tried) unless the caller asked for them
//! to be replaced.

use std::io::{self, Read};

use encoding_rs::{DecoderResult, Encoding};

/// How undecodable bytes are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Stop with an error naming the byte offset (the default).
    #[default]
    Strict,
    /// Replace each bad sequence with U+FFFD and count them.
    Replace,
}

/// What the caller asked for: `auto`, or one encoding by its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodingRequest {
    /// A byte-order mark if there is one, else UTF-8, else the fallback hint (if any), else
    /// GBK when the bytes read cleanly as Chinese text.
    Auto,
    /// This encoding, unless a byte-order mark says otherwise.
    Exact(&'static Encoding),
}

/// The labels accepted besides the WHATWG ones, for names analysts type (`cp936`, `utf8`,
/// `latin-1`, `shift-jis`, `big-5`, `ms949`).
fn alias(norm: &str) -> Option<&'static Encoding> {
    Some(match norm {
        "utf8" | "utf8sig" => encoding_rs::UTF_8,
        "utf16" | "utf16le" => encoding_rs::UTF_16LE,
        "utf16be" => encoding_rs::UTF_16BE,
        "latin1" | "iso88591" | "l1" => encoding_rs::WINDOWS_1252,
        "cp936" | "gb2312" | "gbk" => encoding_rs::GBK,
        "gb18030" => encoding_rs::GB18030,
        "big5" | "cp950" | "big5hkscs" => encoding_rs::BIG5,
        "shiftjis" | "sjis" | "cp932" | "mskanji" | "windows31j" => encoding_rs::SHIFT_JIS,
        "euckr" | "cp949" | "ms949" | "uhc" => encoding_rs::EUC_KR,
        "eucjp" => encoding_rs::EUC_JP,
        _ => {
            let n = norm
                .strip_prefix("cp")
                .or_else(|| norm.strip_prefix("windows"))?;
            return match n {
                "1250" => Some(encoding_rs::WINDOWS_1250),
                "1251" => Some(encoding_rs::WINDOWS_1251),
                "1252" => Some(encoding_rs::WINDOWS_1252),
                "1253" => Some(encoding_rs::WINDOWS_1253),
                "1254" => Some(encoding_rs::WINDOWS_1254),
                "1255" => Some(encoding_rs::WINDOWS_1255),
                "1256" => Some(encoding_rs::WINDOWS_1256),
                "1257" => Some(encoding_rs::WINDOWS_1257),
                "1258" => Some(encoding_rs::WINDOWS_1258),
                "874" => Some(encoding_rs::WINDOWS_874),
                _ => None,
            };
        }
    })
}

/// The labels listed in error messages.
pub const SUPPORTED: &str = "auto, utf-8, utf-16le, utf-16be, gbk, gb18030, big5, shift_jis, \
    euc-kr, euc-jp, windows-1250 … windows-1258, latin-1, or any WHATWG label";

impl EncodingRequest {
    /// Parses a label: `auto`, a WHATWG label (`gbk`, `shift_jis`, `windows-1251`, …) or a
    /// common alias (`cp936`, `latin-1`, `utf8`). `None` when unknown.
    pub fn from_label(label: &str) -> Option<Self> {
        let trimmed = label.trim();
        if trimmed.eq_ignore_ascii_case("auto") || trimmed.is_empty() {
            return Some(Self::Auto);
        }
        let norm: String = trimmed
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect();
        alias(&norm)
            .or_else(|| Encoding::for_label(trimmed.as_bytes()))
            .map(Self::Exact)
    }
}

/// The encoding chosen for a file, and how many bytes of byte-order mark to skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detected {
    /// The encoding.
    pub encoding: &'static Encoding,
    /// Bytes of BOM at the start (0 when none).
    pub bom_len: usize,
    /// Whether the choice came from a BOM.
    pub from_bom: bool,
    /// The encodings `auto` tried, in order (empty when a BOM or the caller chose): a decoding
    /// error names them, so the reader knows to give the encoding.
    pub tried: Tried,
}

/// The encodings `auto` tried before it chose (at most three: UTF-8, the fallback, GBK).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tried([Option<&'static Encoding>; 3]);

impl Tried {
    fn push(&mut self, encoding: &'static Encoding) {
        if let Some(slot) = self.0.iter_mut().find(|s| s.is_none()) {
            *slot = Some(encoding);
        }
    }

    /// The encodings, in the order tried.
    pub fn iter(&self) -> impl Iterator<Item = &'static Encoding> + '_ {
        self.0.iter().flatten().copied()
    }

    /// Their labels, `utf-8, gbk`.
    pub fn labels(&self) -> String {
        self.iter()
            .map(|e| e.name().to_ascii_lowercase())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Detected {
    /// The label reported to the model (`utf-8`, `gbk`, `shift_jis`, `utf-16le`, …).
    pub fn label(&self) -> String {
        self.encoding.name().to_ascii_lowercase()
    }

    fn chosen(encoding: &'static Encoding, tried: Tried) -> Self {
        Self {
            encoding,
            bom_len: 0,
            from_bom: false,
            tried,
        }
    }
}

/// Chooses the encoding of a file from its first bytes: a BOM wins (UTF-8, UTF-16LE/BE);
/// otherwise the request's encoding; with `auto`, UTF-8 when `head` is valid UTF-8 (up to a
/// character cut at the end), else `fallback` when given and `head` decodes in it, else GBK
/// when `head` decodes cleanly as GBK/GB18030 and reads as Chinese text
/// ([`reads_as_chinese`]), else UTF-8 — and decoding then reports the first bad byte with the
/// encodings tried.
pub fn detect(
    head: &[u8],
    request: EncodingRequest,
    fallback: Option<&'static Encoding>,
) -> Detected {
    if let Some((encoding, bom_len)) = Encoding::for_bom(head) {
        return Detected {
            encoding,
            bom_len,
            from_bom: true,
            tried: Tried::default(),
        };
    }
    if let EncodingRequest::Exact(encoding) = request {
        return Detected::chosen(encoding, Tried::default());
    }
    let mut tried = Tried::default();
    tried.push(encoding_rs::UTF_8);
    if valid_utf8_prefix(head) {
        return Detected::chosen(encoding_rs::UTF_8, tried);
    }
    if let Some(f) = fallback.filter(|f| *f != encoding_rs::UTF_8) {
        tried.push(f);
        if decode_head(head, f).is_some() {
            return Detected::chosen(f, tried);
        }
    }
    if fallback != Some(encoding_rs::GBK) {
        tried.push(encoding_rs::GBK);
        if reads_as_chinese(head) {
            return Detected::chosen(encoding_rs::GBK, tried);
        }
    }
    Detected::chosen(encoding_rs::UTF_8, tried)
}

/// Chinese characters a head must hold before `auto` takes it for GBK: a few bytes of another
/// single-byte encoding can decode as two or three.
const MIN_HAN: usize = 4;

/// The Hangul syllables most frequent in Korean text; a quarter or more of Korean's syllables
/// are among them, and a few in a hundred of the syllables Chinese GBK text decodes into as
/// EUC-KR.
const COMMON_HANGUL: &str = "이다는의에가을하고한서지기로를들사도자대어시으리나일인정수과해것있게라보면\
    구전부적만아위상국주요원문동제";

/// Whether `head` is GBK (or GB18030) Chinese text, read as an analyst's files are: it decodes
/// without a bad sequence (one cut at the end allowed) into at least [`MIN_HAN`] Chinese
/// characters and few kana (EUC-JP decodes too, kana and all); four in five of its two-byte
/// characters are GB2312's (lead and trail bytes from 0xA1, as Chinese prose and tables are),
/// and two in three of its GB2312 characters are of the common level (lead bytes 0xB0–0xD7) —
/// Cyrillic letters that pair up into characters land mostly in the rare level; and it is not
/// Korean (EUC-KR has GB2312's shape: text that decodes as EUC-KR into Hangul, with Korean's
/// common syllables among it, is left alone).
pub fn reads_as_chinese(head: &[u8]) -> bool {
    const SNIFF: usize = 64 * 1024;
    let head = &head[..head.len().min(SNIFF)];
    let Some(text) = decode_head(head, encoding_rs::GBK) else {
        return false;
    };
    let han = text
        .chars()
        .filter(|c| matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}'))
        .count();
    let kana = text
        .chars()
        .filter(|c| matches!(c, '\u{3040}'..='\u{30FF}'))
        .count();
    if han < MIN_HAN || kana * 10 >= han {
        return false;
    }
    let (mut double, mut gb2312, mut hanzi, mut common) = (0usize, 0usize, 0usize, 0usize);
    let mut i = 0;
    while i + 1 < head.len() {
        let (lead, trail) = (head[i], head[i + 1]);
        if lead < 0x80 {
            i += 1;
            continue;
        }
        if trail.is_ascii_digit() {
            // A four-byte GB18030 sequence.
            i += 4;
            continue;
        }
        double += 1;
        if (0xA1..=0xF7).contains(&lead) && trail >= 0xA1 {
            gb2312 += 1;
            if lead >= 0xB0 {
                hanzi += 1;
                if lead <= 0xD7 {
                    common += 1;
                }
            }
        }
        i += 2;
    }
    gb2312 * 5 >= double * 4 && common * 3 >= hanzi * 2 && !reads_as_korean(head)
}

/// Whether `head` decodes as EUC-KR into Hangul (four in five of its other characters), a
/// quarter of it Korean's most common syllables.
fn reads_as_korean(head: &[u8]) -> bool {
    let Some(text) = decode_head(head, encoding_rs::EUC_KR) else {
        return false;
    };
    let wide = text.chars().filter(|c| !c.is_ascii()).count();
    let hangul: Vec<char> = text
        .chars()
        .filter(|c| matches!(c, '\u{AC00}'..='\u{D7A3}'))
        .collect();
    let common = hangul
        .iter()
        .filter(|c| COMMON_HANGUL.contains(**c))
        .count();
    !hangul.is_empty() && hangul.len() * 5 >= wide * 4 && common * 4 >= hangul.len()
}

/// `head` decoded in `encoding`, or `None` at a bad sequence (one cut at the end allowed).
fn decode_head(head: &[u8], encoding: &'static Encoding) -> Option<String> {
    let mut decoder = encoding.new_decoder_without_bom_handling();
    let mut out = vec![0; decoder.max_utf8_buffer_length(head.len())?.max(16)];
    let (result, _, written) = decoder.decode_to_utf8_without_replacement(head, &mut out, false);
    if matches!(result, DecoderResult::Malformed(..)) {
        return None;
    }
    out.truncate(written);
    String::from_utf8(out).ok()
}

/// Whether `bytes` is UTF-8, allowing one character cut off at the end.
fn valid_utf8_prefix(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && bytes.len() - e.valid_up_to() < 4,
    }
}

/// Bytes that are not valid in the encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The encoding.
    pub encoding: String,
    /// Offset of the first bad byte from the start of the file.
    pub offset: u64,
    /// The bad bytes (at most four).
    pub bytes: Vec<u8>,
    /// The encodings `auto` tried (`utf-8, gbk`), empty when the encoding was given.
    pub tried: String,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: Vec<String> = self.bytes.iter().map(|b| format!("0x{b:02X}")).collect();
        write!(
            f,
            "bytes not valid in {} at byte offset {} ({})",
            self.encoding,
            self.offset,
            hex.join(" ")
        )?;
        if !self.tried.is_empty() {
            write!(
                f,
                "; no encoding was given, and the file is none of those tried ({})",
                self.tried
            )?;
        }
        write!(
            f,
            "; give the file's encoding (e.g. \"encoding\": \"big5\", \"shift_jis\", \
             \"euc-kr\", \"windows-1252\") or errors: \"replace\""
        )
    }
}

impl std::error::Error for Malformed {}

/// A reader giving the UTF-8 text of an encoded byte stream.
///
/// In [`OnError::Strict`] mode a bad sequence ends reading with an `InvalidData` error whose
/// inner error is a [`Malformed`]; in [`OnError::Replace`] mode it becomes U+FFFD and
/// [`DecodeReader::replaced`] counts it.
#[derive(Debug)]
pub struct DecodeReader<R> {
    inner: R,
    decoder: encoding_rs::Decoder,
    encoding: &'static Encoding,
    tried: Tried,
    on_error: OnError,
    input: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// File offset of `input[0]`.
    base: u64,
    output: Vec<u8>,
    out_pos: usize,
    replaced: u64,
    finished: bool,
}

const CHUNK: usize = 64 * 1024;

impl<R: Read> DecodeReader<R> {
    /// Decodes `inner` (positioned after the `detected.bom_len` bytes of BOM, which the caller
    /// skipped) as `detected.encoding`.
    pub fn new(inner: R, detected: Detected, on_error: OnError) -> Self {
        Self {
            inner,
            decoder: detected.encoding.new_decoder_without_bom_handling(),
            encoding: detected.encoding,
            tried: detected.tried,
            on_error,
            input: vec![0; CHUNK],
            start: 0,
            end: 0,
            eof: false,
            base: detected.bom_len as u64,
            output: Vec::with_capacity(CHUNK * 3 + 16),
            out_pos: 0,
            replaced: 0,
            finished: false,
        }
    }

    /// Bad sequences replaced so far ([`OnError::Replace`] only).
    pub fn replaced(&self) -> u64 {
        self.replaced
    }

    /// Bytes of the source consumed so far (BOM included).
    pub fn consumed(&self) -> u64 {
        self.base + self.start as u64
    }

    fn refill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.base += self.start as u64;
            self.end -= self.start;
            self.start = 0;
        }
        while !self.eof && self.end < self.input.len() {
            let n = self.inner.read(&mut self.input[self.end..])?;
            if n == 0 {
                self.eof = true;
            }
            self.end += n;
            if n > 0 {
                break;
            }
        }
        Ok(())
    }

    fn decode_more(&mut self) -> io::Result<()> {
        self.output.clear();
        self.out_pos = 0;
        while self.output.is_empty() && !self.finished {
            if self.start == self.end || !self.eof {
                self.refill()?;
            }
            let last = self.eof;
            let src = &self.input[self.start..self.end];
            let cap = self
                .decoder
                .max_utf8_buffer_length(src.len())
                .unwrap_or(CHUNK * 4)
                .max(16);
            self.output.resize(cap, 0);
            let (read, written) =
                match self.on_error {
                    OnError::Strict => {
                        let (result, read, written) = self
                            .decoder
                            .decode_to_utf8_without_replacement(src, &mut self.output, last);
                        if let DecoderResult::Malformed(bad, extra) = result {
                            let bad_end = read - usize::from(extra);
                            let bad_start = bad_end.saturating_sub(usize::from(bad));
                            let bytes = src[bad_start..bad_end].iter().take(4).copied().collect();
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                Malformed {
                                    encoding: self.encoding.name().to_ascii_lowercase(),
                                    offset: self.base + (self.start + bad_start) as u64,
                                    bytes,
                                    tried: self.tried.labels(),
                                },
                            ));
                        }
                        (read, written)
                    }
                    OnError::Replace => {
                        let (_, read, written, replaced) =
                            self.decoder.decode_to_utf8(src, &mut self.output, last);
                        if replaced {
                            let text = &self.output[..written];
                            self.replaced += count_replacements(text);
                        }
                        (read, written)
                    }
                };
            self.start += read;
            self.output.truncate(written);
            if last && self.start == self.end {
                self.finished = true;
            }
        }
        Ok(())
    }
}

fn count_replacements(text: &[u8]) -> u64 {
    text.windows(3).filter(|w| *w == [0xEF, 0xBF, 0xBD]).count() as u64
}

impl<R: Read> Read for DecodeReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.out_pos == self.output.len() {
            self.decode_more()?;
        }
        let available = &self.output[self.out_pos..];
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.out_pos += n;
        Ok(n)
    }
}

/// The [`Malformed`] inside an I/O error from a [`DecodeReader`], if that is what it is.
pub fn malformed_of(err: &io::Error) -> Option<&Malformed> {
    err.get_ref()?.downcast_ref::<Malformed>()
}

/// Decodes a whole buffer (BOM skipped) as `detected.encoding`. Returns the text and the
/// count of replaced sequences.
///
/// # Errors
/// The first [`Malformed`] sequence in strict mode.
pub fn decode_all(
    bytes: &[u8],
    detected: Detected,
    on_error: OnError,
) -> Result<(String, u64), Malformed> {
    let body = &bytes[detected.bom_len.min(bytes.len())..];
    let mut reader = DecodeReader::new(body, detected, on_error);
    let mut text = String::with_capacity(body.len());
    match reader.read_to_string(&mut text) {
        Ok(_) => Ok((text, reader.replaced())),
        Err(err) => Err(malformed_of(&err).cloned().unwrap_or_else(|| Malformed {
            encoding: detected.label(),
            offset: reader.consumed(),
            bytes: Vec::new(),
            tried: detected.tried.labels(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(label: &str) -> Detected {
        let Some(EncodingRequest::Exact(e)) = EncodingRequest::from_label(label) else {
            panic!("{label} unknown");
        };
        detect(b"", EncodingRequest::Exact(e), None)
    }

    #[test]
    fn labels_cover_the_analysts_encodings() {
        for (label, name) in [
            ("GBK", "GBK"),
            ("cp936", "GBK"),
            ("gb18030", "gb18030"),
            ("Big5", "Big5"),
            ("Shift_JIS", "Shift_JIS"),
            ("sjis", "Shift_JIS"),
            ("euc-kr", "EUC-KR"),
            ("cp949", "EUC-KR"),
            ("windows-1251", "windows-1251"),
            ("cp1258", "windows-1258"),
            ("latin-1", "windows-1252"),
            ("utf8", "UTF-8"),
            ("UTF-16", "UTF-16LE"),
        ] {
            assert_eq!(exact(label).encoding.name(), name, "{label}");
        }
        assert_eq!(
            EncodingRequest::from_label(" Auto "),
            Some(EncodingRequest::Auto)
        );
        assert_eq!(EncodingRequest::from_label("klingon"), None);
    }

    #[test]
    fn boms_win_and_auto_falls_back_to_the_hint() {
        let d = detect(b"\xFF\xFEa\x00", EncodingRequest::Auto, None);
        assert_eq!((d.encoding, d.bom_len), (encoding_rs::UTF_16LE, 2));
        let d = detect(
            b"\xEF\xBB\xBFx",
            EncodingRequest::Exact(encoding_rs::GBK),
            None,
        );
        assert_eq!(d.encoding, encoding_rs::UTF_8);
        let d = detect(
            b"\xC4\xE3\xBA\xC3",
            EncodingRequest::Auto,
            Some(encoding_rs::GBK),
        );
        assert_eq!(d.encoding, encoding_rs::GBK);
        // A configured fallback comes before GBK.
        let d = detect(
            b"\xC4\xE3\xBA\xC3",
            EncodingRequest::Auto,
            Some(encoding_rs::BIG5),
        );
        assert_eq!(d.encoding, encoding_rs::BIG5);
        assert_eq!(d.tried.labels(), "utf-8, big5");
        // A character cut at the end of the sniffed head is still UTF-8.
        assert!(valid_utf8_prefix("ab你".as_bytes().split_at(4).0));
    }

    #[test]
    fn auto_reads_chinese_text_without_a_label_as_gbk() {
        // A GBK CSV with a Chinese header, as a spreadsheet on a Chinese Windows saves it.
        let text = "地区,季度,销售额,目标\n华东,2024Q1,1200,1000\n华北,2024Q2,980,1100\n";
        let (gbk, _, _) = encoding_rs::GBK.encode(text);
        assert_eq!(gbk[0], 0xB5, "not valid UTF-8 from its first byte");
        let d = detect(&gbk, EncodingRequest::Auto, None);
        assert_eq!(
            (d.label(), d.tried.labels()),
            ("gbk".into(), "utf-8, gbk".into())
        );
        assert_eq!(decode_all(&gbk, d, OnError::Strict).unwrap().0, text);
        // GB18030's four-byte sequences decode too (the GBK decoder is GB18030's).
        let (gb18030, _, _) = encoding_rs::GB18030.encode("名称,€,𠀀\n中文,1,2\n");
        let d = detect(&gb18030, EncodingRequest::Auto, None);
        assert_eq!(d.label(), "gbk");
        assert!(decode_all(&gb18030, d, OnError::Strict).is_ok());
        // UTF-8, with or without a BOM, and UTF-16 with its BOM stay what they are.
        let d = detect(text.as_bytes(), EncodingRequest::Auto, None);
        assert_eq!(d.label(), "utf-8");
        let mut sig = b"\xEF\xBB\xBF".to_vec();
        sig.extend_from_slice(text.as_bytes());
        assert_eq!(detect(&sig, EncodingRequest::Auto, None).bom_len, 3);
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        let d = detect(&utf16, EncodingRequest::Auto, None);
        assert_eq!((d.label(), d.bom_len), ("utf-16le".into(), 2));
        assert_eq!(decode_all(&utf16, d, OnError::Strict).unwrap().0, text);
    }

    #[test]
    fn latin_text_is_not_taken_for_chinese_and_the_error_names_what_was_tried() {
        // windows-1252 names: `é`, `ü`, `ï` followed by letters decode as rare GBK characters.
        let (latin, _, _) =
            encoding_rs::WINDOWS_1252.encode("name,city\nRenée,Zürich\nBenoît,Dijon\n");
        let d = detect(&latin, EncodingRequest::Auto, None);
        assert_eq!(d.label(), "utf-8");
        assert_eq!(d.tried.labels(), "utf-8, gbk");
        let err = decode_all(&latin, d, OnError::Strict).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(
                "no encoding was given, and the file is none of those tried (utf-8, gbk)"
            ) && text.contains("\"encoding\": \"big5\"")
                && text.contains("errors: \"replace\""),
            "{text}"
        );
        // Given, the encoding is not second-guessed.
        let given = detect(
            &latin,
            EncodingRequest::Exact(encoding_rs::WINDOWS_1252),
            None,
        );
        assert_eq!(
            decode_all(&latin, given, OnError::Strict)
                .unwrap()
                .0
                .lines()
                .nth(1),
            Some("Renée,Zürich")
        );
        assert!(!reads_as_chinese(b"plain ascii"));
    }

    #[test]
    fn bad_bytes_are_reported_with_their_offset_or_replaced() {
        let bytes = b"ok,\xE4\xBD\xA0\nbad \xFF here";
        let d = detect(bytes, EncodingRequest::Auto, None);
        let err = decode_all(bytes, d, OnError::Strict).unwrap_err();
        assert_eq!(err.offset, 11);
        assert_eq!(err.bytes, [0xFF]);
        assert!(err.to_string().contains("offset 11"), "{err}");
        let (text, replaced) = decode_all(bytes, d, OnError::Replace).unwrap();
        assert_eq!(text, "ok,你\nbad \u{FFFD} here");
        assert_eq!(replaced, 1);
        let (text, _) = decode_all(b"\xC4\xE3\xBA\xC3", exact("gbk"), OnError::Strict).unwrap();
        assert_eq!(text, "你好");
    }

    #[test]
    fn offsets_count_across_chunks_and_boms() {
        let mut bytes = b"\xEF\xBB\xBF".to_vec();
        bytes.extend(std::iter::repeat_n(b'a', CHUNK * 2 + 5));
        bytes.push(0xC3);
        bytes.push(b'x');
        let d = detect(&bytes, EncodingRequest::Auto, None);
        let err = decode_all(&bytes, d, OnError::Strict).unwrap_err();
        assert_eq!(err.offset, (3 + CHUNK * 2 + 5) as u64);
    }

    proptest::proptest! {
        #[test]
        fn streamed_decoding_matches_whole_decoding(text in "[a-z你好,\n€]{0,200}") {
            for encoding in [encoding_rs::GBK, encoding_rs::BIG5, encoding_rs::GB18030] {
                let (bytes, _, unmappable) = encoding.encode(&text);
                proptest::prop_assert!(!unmappable);
                let d = Detected { encoding, bom_len: 0, from_bom: false, tried: Tried::default() };
                let (decoded, replaced) = decode_all(&bytes, d, OnError::Strict).unwrap();
                proptest::prop_assert_eq!(replaced, 0);
                proptest::prop_assert_eq!(&decoded, &text);
            }
        }
    }
}
