//! Text encodings through `encoding_rs`: choosing the encoding of a file (a byte-order mark
//! wins, then the caller's label, then UTF-8 and a configured fallback) and decoding it as a
//! stream, whole or in part, with undecodable bytes reported by their offset unless the caller
//! asked for them to be replaced.

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
    /// A byte-order mark if there is one, else UTF-8, else the fallback hint (if any).
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
}

impl Detected {
    /// The label reported to the model (`utf-8`, `gbk`, `shift_jis`, `utf-16le`, …).
    pub fn label(&self) -> String {
        self.encoding.name().to_ascii_lowercase()
    }
}

/// Chooses the encoding of a file from its first bytes: a BOM wins; otherwise the request's
/// encoding; with `auto`, UTF-8 when `head` is valid UTF-8 (up to a character cut at the end),
/// else `fallback` when given, else UTF-8 (and decoding will report the first bad byte).
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
        };
    }
    let encoding = match request {
        EncodingRequest::Exact(e) => e,
        EncodingRequest::Auto => match (valid_utf8_prefix(head), fallback) {
            (true, _) | (false, None) => encoding_rs::UTF_8,
            (false, Some(f)) => f,
        },
    };
    Detected {
        encoding,
        bom_len: 0,
        from_bom: false,
    }
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
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: Vec<String> = self.bytes.iter().map(|b| format!("0x{b:02X}")).collect();
        write!(
            f,
            "bytes not valid in {} at byte offset {} ({}); give the file's encoding (e.g. \
             \"gbk\", \"big5\", \"shift_jis\", \"windows-1252\") or errors: \"replace\"",
            self.encoding,
            self.offset,
            hex.join(" ")
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
        let d = detect(b"\xC4\xE3\xBA\xC3", EncodingRequest::Auto, None);
        assert_eq!(d.encoding, encoding_rs::UTF_8);
        let d = detect(
            b"\xC4\xE3\xBA\xC3",
            EncodingRequest::Auto,
            Some(encoding_rs::GBK),
        );
        assert_eq!(d.encoding, encoding_rs::GBK);
        // A character cut at the end of the sniffed head is still UTF-8.
        assert!(valid_utf8_prefix("ab你".as_bytes().split_at(4).0));
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
                let d = Detected { encoding, bom_len: 0, from_bom: false };
                let (decoded, replaced) = decode_all(&bytes, d, OnError::Strict).unwrap();
                proptest::prop_assert_eq!(replaced, 0);
                proptest::prop_assert_eq!(&decoded, &text);
            }
        }
    }
}
