//! Model names for MCP tools: `server__tool` in the characters and length the model APIs accept.
//!
//! The APIs take `^[A-Za-z0-9_-]{1,64}$`. A tool's name is its server's and its own, each with
//! every other character replaced by `_`, joined by `__`. When that is over 64 bytes, or two
//! tools would get the same name (`a.b` and `a_b`), each of them gets a short hash of its raw
//! identity instead of the tail. Names are a function of the whole set of tools, whatever order
//! the servers arrive in, and map back through a table — never by splitting on `__`.

use std::collections::{HashMap, HashSet};

/// The longest name the model APIs accept.
pub const MAX_MODEL_NAME_BYTES: usize = 64;
/// Hex digits of the hash suffix.
const HASH_HEX: usize = 12;

/// `name` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub(crate) fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// 64-bit FNV-1a: small, stable across releases and platforms (names end up in logs and caches).
pub(crate) fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, part) in parts.iter().enumerate() {
        // A zero byte between parts, so ("ab", "c") and ("a", "bc") differ.
        let separator: &[u8] = if i > 0 { &[0] } else { &[] };
        for &b in separator.iter().chain(part.iter()) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    hash
}

fn hashed(primary: &str, server: &str, tool: &str, salt: u32) -> String {
    let salt_text = salt.to_string();
    let mut parts: Vec<&[u8]> = vec![server.as_bytes(), tool.as_bytes()];
    if salt > 0 {
        parts.push(salt_text.as_bytes());
    }
    let hex = format!("{:016x}", fnv1a64(&parts));
    // `primary` is ASCII, so any byte index is a character boundary.
    let keep = primary.len().min(MAX_MODEL_NAME_BYTES - HASH_HEX - 1);
    format!("{}_{}", &primary[..keep], &hex[..HASH_HEX])
}

/// Model names for `(server, raw tool)` pairs, in input order. The pairs must be distinct and
/// the tool names non-empty.
pub(crate) fn assign_model_names(ids: &[(&str, &str)]) -> Vec<String> {
    let primaries: Vec<String> = ids
        .iter()
        .map(|(server, tool)| format!("{}__{}", sanitize(server), sanitize(tool)))
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for p in &primaries {
        *counts.entry(p.as_str()).or_default() += 1;
    }
    let mut names: Vec<Option<String>> = vec![None; ids.len()];
    let mut used: HashSet<String> = HashSet::new();
    let mut to_hash = Vec::new();
    for (i, p) in primaries.iter().enumerate() {
        if p.len() <= MAX_MODEL_NAME_BYTES && counts.get(p.as_str()) == Some(&1) {
            used.insert(p.clone());
            names[i] = Some(p.clone());
        } else {
            to_hash.push(i);
        }
    }
    // Hashed names in the order of the raw identities, so the result does not depend on the
    // input order even in the (adversarial) case of a hash colliding with a name in use.
    to_hash.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
    for i in to_hash {
        let (server, tool) = ids[i];
        let mut salt = 0;
        let mut name = hashed(&primaries[i], server, tool, salt);
        while used.contains(&name) {
            salt += 1;
            name = hashed(&primaries[i], server, tool, salt);
        }
        used.insert(name.clone());
        names[i] = Some(name);
    }
    names.into_iter().map(Option::unwrap_or_default).collect()
}

/// Whether `name` is one the model APIs accept.
pub fn is_valid_model_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_MODEL_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assign(ids: &[(&str, &str)]) -> Vec<String> {
        assign_model_names(ids)
    }

    #[test]
    fn plain_names_when_they_fit() {
        assert_eq!(
            assign(&[
                ("files", "read_file"),
                ("git", "git.log"),
                ("w eb", "fetch/url")
            ]),
            ["files__read_file", "git__git_log", "w_eb__fetch_url"]
        );
    }

    #[test]
    fn collisions_hash_every_member() {
        let names = assign(&[("s", "a.b"), ("s", "a_b"), ("s", "c")]);
        assert_eq!(names[2], "s__c");
        assert!(names[0].starts_with("s__a_b_") && names[1].starts_with("s__a_b_"));
        assert_ne!(names[0], names[1]);
        assert_eq!(names[0].len(), "s__a_b_".len() + 12);
        // A server named with `__` cannot take another's name either.
        let names = assign(&[("p__srv", "tool"), ("p", "srv__tool")]);
        assert_ne!(names[0], names[1]);
    }

    #[test]
    fn long_names_are_cut_with_a_hash() {
        let tool = "t".repeat(80);
        let names = assign(&[("plugin__server", &tool)]);
        assert_eq!(names[0].len(), 64);
        assert!(names[0].starts_with("plugin__server__ttt"));
        assert!(is_valid_model_name(&names[0]));
        // Stable across releases: the log and the tool cache rely on it.
        assert_eq!(assign(&[("plugin__server", &tool)]), names);
        assert_eq!(
            &names[0][52..],
            &format!("{:016x}", fnv1a64(&[b"plugin__server", tool.as_bytes()]))[..12]
        );
    }

    fn ids_strategy() -> impl Strategy<Value = Vec<(String, String)>> {
        proptest::collection::btree_set(
            (
                "[a-c._é]{1,3}|[a-z_]{1,40}",
                "[a-c._/ é-]{1,4}|[a-z]{20,70}",
            ),
            0..12,
        )
        .prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        #[test]
        fn names_are_valid_unique_and_order_free(ids in ids_strategy(), seed in any::<u64>()) {
            let refs: Vec<(&str, &str)> = ids.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
            let names = assign_model_names(&refs);
            let unique: HashSet<&String> = names.iter().collect();
            prop_assert_eq!(unique.len(), names.len());
            for n in &names {
                prop_assert!(is_valid_model_name(n), "{}", n);
            }
            // Any order gives every pair the same name.
            let mut order: Vec<usize> = (0..refs.len()).collect();
            let mut x = seed;
            for i in (1..order.len()).rev() {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(i, (x >> 33) as usize % (i + 1));
            }
            let shuffled: Vec<(&str, &str)> = order.iter().map(|&i| refs[i]).collect();
            let again = assign_model_names(&shuffled);
            for (k, &i) in order.iter().enumerate() {
                prop_assert_eq!(&again[k], &names[i]);
            }
        }
    }
}
