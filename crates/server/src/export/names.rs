//! Names of the files a report carries beside it (`files/<name>`): taken from the file's own
//! name, safe on every disk (no folder, no `..`, no control or format character, none of the
//! characters Windows refuses) and unique within the report, whatever their case.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// The folder beside the report that holds its files.
pub(crate) const FOLDER: &str = "files";
/// The longest name kept, in characters (its extension kept whole when short).
const MAX_CHARS: usize = 100;
/// Names Windows keeps for devices, whatever the extension.
const DEVICES: [&str; 22] = [
    "con", "prn", "aux", "nul", "com1", "com2", "com3", "com4", "com5", "com6", "com7", "com8",
    "com9", "lpt1", "lpt2", "lpt3", "lpt4", "lpt5", "lpt6", "lpt7", "lpt8", "lpt9",
];

/// Invisible characters that change how text reads (bidirectional overrides and isolates,
/// zero-width characters, the soft hyphen, the byte order mark).
pub(crate) fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// `text` without control or format characters, each run of whitespace one space, trimmed:
/// what a document shows of a name or a title someone else chose.
pub(crate) fn clean_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else if !c.is_control() && !is_format(c) {
            out.push(c);
        }
    }
    out.trim_end().to_owned()
}

/// A file name made from `name` (which may be a path, or hostile): its last component, cleaned,
/// `fallback` when nothing is left.
pub(crate) fn safe_name(name: &str, fallback: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let mut out = String::with_capacity(last.len());
    for c in clean_text(last).chars() {
        out.push(match c {
            '<' | '>' | ':' | '"' | '|' | '?' | '*' => '_',
            c => c,
        });
    }
    let trimmed = out.trim_matches(|c: char| c == '.' || c == ' ');
    let mut name = if trimmed.is_empty() {
        fallback.to_owned()
    } else {
        trimmed.to_owned()
    };
    let device = DEVICES.contains(&split_extension(&name).0.to_ascii_lowercase().as_str());
    if device {
        name = format!("_{name}");
    }
    shorten(&name)
}

/// `(stem, extension)`, the extension with its dot (`""` when there is none, or it is long).
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(at) if at > 0 && name.len() - at <= 16 => name.split_at(at),
        _ => (name, ""),
    }
}

fn shorten(name: &str) -> String {
    if name.chars().count() <= MAX_CHARS {
        return name.to_owned();
    }
    let (stem, ext) = split_extension(name);
    let keep = MAX_CHARS - ext.chars().count();
    let stem: String = stem.chars().take(keep).collect();
    format!("{}{ext}", stem.trim_end_matches(['.', ' ']))
}

/// `text` percent-encoded for a path segment.
pub(crate) fn url_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A file's place beside the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Place {
    /// Its path in the bundle, `files/<name>`.
    pub(crate) path: String,
    /// The link to it from the report (percent-encoded).
    pub(crate) href: String,
}

/// The names given so far in one report.
#[derive(Debug, Default)]
pub(crate) struct Names {
    taken: HashSet<String>,
    by_id: HashMap<String, Place>,
}

impl Names {
    /// The place of the stored file `id` named `name`: the same place each time it is asked.
    pub(crate) fn stored(&mut self, id: &str, name: &str) -> Place {
        if let Some(place) = self.by_id.get(id) {
            return place.clone();
        }
        let place = self.fresh(name);
        self.by_id.insert(id.to_owned(), place.clone());
        place
    }

    /// A new place for a file the report makes (a chart drawn as an image).
    pub(crate) fn fresh(&mut self, name: &str) -> Place {
        let base = safe_name(name, "file");
        let mut name = base.clone();
        let mut n = 1;
        while !self.taken.insert(name.to_lowercase()) {
            n += 1;
            let (stem, ext) = split_extension(&base);
            name = format!("{stem}-{n}{ext}");
        }
        Place {
            path: format!("{FOLDER}/{name}"),
            href: format!("{FOLDER}/{}", url_component(&name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_their_last_component_cleaned() {
        for (given, expected) in [
            ("sales.csv", "sales.csv"),
            ("../../etc/passwd", "passwd"),
            ("..\\..\\boot.ini", "boot.ini"),
            ("..", "file"),
            ("", "file"),
            (" .hidden. ", "hidden"),
            ("a\u{0}b\u{1b}[31mc.txt", "ab[31mc.txt"),
            ("invoice\u{202E}gpj.exe", "invoicegpj.exe"),
            ("what?<now>:*.csv", "what__now___.csv"),
            ("CON.txt", "_CON.txt"),
            ("销售 2024_gbk.csv", "销售 2024_gbk.csv"),
        ] {
            assert_eq!(safe_name(given, "file"), expected, "{given:?}");
        }
        let long = format!("{}.csv", "x".repeat(300));
        let short = safe_name(&long, "file");
        assert_eq!(short.chars().count(), MAX_CHARS);
        assert!(short.ends_with("x.csv"), "{short}");
    }

    #[test]
    fn places_are_unique_and_stable_per_file() {
        let mut names = Names::default();
        let a = names.stored("upload_001", "sales.csv");
        assert_eq!(a.path, "files/sales.csv");
        assert_eq!(names.stored("upload_001", "sales.csv"), a);
        assert_eq!(
            names.stored("output_001", "Sales.CSV").path,
            "files/Sales-2.CSV"
        );
        assert_eq!(names.fresh("sales.csv").path, "files/sales-3.csv");
        let p = names.stored("upload_002", "销售 数据.csv");
        assert_eq!(p.path, "files/销售 数据.csv");
        assert_eq!(p.href, "files/%E9%94%80%E5%94%AE%20%E6%95%B0%E6%8D%AE.csv");
    }

    proptest! {
        #[test]
        fn every_name_is_one_safe_component(name in "\\PC{0,40}|[./\\\\ \u{0}-\u{1f}\u{202e}a-z]{0,40}") {
            let safe = safe_name(&name, "file");
            prop_assert!(!safe.is_empty());
            prop_assert!(safe.chars().count() <= MAX_CHARS);
            prop_assert!(!safe.contains(['/', '\\', '<', '>', ':', '"', '|', '?', '*']), "{safe:?}");
            prop_assert!(!safe.chars().any(|c| c.is_control() || is_format(c)), "{safe:?}");
            prop_assert!(!safe.starts_with('.') && !safe.ends_with('.'), "{safe:?}");
            prop_assert!(safe != "..");
        }

        #[test]
        fn places_never_collide(names in proptest::collection::vec("[aA./ ]{0,4}(\\.[cC][sS][vV])?", 1..20)) {
            let mut given = Names::default();
            let mut seen = HashSet::new();
            for (i, name) in names.iter().enumerate() {
                let place = given.stored(&format!("id{i}"), name);
                prop_assert!(seen.insert(place.path.to_lowercase()), "{} twice", place.path);
            }
        }
    }
}
