//! Files as tests send and receive them: a multipart upload body, the entries of a zip.

use std::collections::BTreeMap;
use std::io::Read as _;

/// A `multipart/form-data` body with one part, `file`, named `name`: the content type to send
/// (with its boundary) and the body.
pub fn multipart_file(name: &str, bytes: &[u8]) -> (String, Vec<u8>) {
    let boundary = "XbOuNdArYx7f3a";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(bytes);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Every entry of a zip archive: its name (as stored) and its bytes.
pub fn unzip(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut out = BTreeMap::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        let mut data = Vec::new();
        f.read_to_end(&mut data).unwrap();
        out.insert(f.name().unwrap().into_owned(), data);
    }
    out
}
