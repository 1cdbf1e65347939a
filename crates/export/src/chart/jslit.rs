//! A small, bounded reader for the JavaScript literals a report's scripts hand to ECharts.
//!
//! It reads objects, arrays, strings, numbers, `true`/`false`/`null` and identifiers that
//! name earlier literal declarations. Anything else (functions, arrow functions, `new ...`,
//! calls, arithmetic) is skipped up to the next `,`, `;` or closing bracket at the same
//! depth and read as `null`. Nesting, work and output size are capped, and nothing here
//! recurses deeper than [`MAX_DEPTH`] frames, so hostile input cannot hang or overflow it.

use serde_json::{Map, Number, Value};
use std::collections::HashMap;

/// Deepest nesting of arrays and objects that is read; anything deeper is skipped as `null`.
pub(super) const MAX_DEPTH: usize = 64;

/// How many value nodes one [`parse_js_literal`] call may build (copies of variables included).
#[cfg(test)]
const TEST_BUDGET: usize = 1_000_000;

/// Variables declared earlier in the report's scripts with literal values, by name.
pub(super) type Vars = HashMap<String, Value>;

/// Reads one JavaScript literal from the whole of `src` (a trailing `;` is allowed), resolving
/// identifiers through `vars`; `None` when `src` is not a literal, or is cut short.
#[cfg(test)]
pub(crate) fn parse_js_literal(src: &str, vars: &Vars) -> Option<Value> {
    let mut budget = TEST_BUDGET;
    let (value, end) = parse_expr_at(src, 0, vars, &mut budget);
    let mut p = Parser::new(src, end, vars, 0);
    loop {
        p.blank();
        if p.peek() != b';' {
            break;
        }
        p.i = p.i.saturating_add(1);
    }
    if p.eof() { value } else { None }
}

/// Reads one expression starting at byte `start` of `src`. Returns the value (`None` when the
/// expression is not a literal; it is then skipped) and the byte offset just after it.
/// `budget` is the number of value nodes still allowed to be built; it is used up as they are.
pub(super) fn parse_expr_at(
    src: &str,
    start: usize,
    vars: &Vars,
    budget: &mut usize,
) -> (Option<Value>, usize) {
    let mut p = Parser::new(src, start, vars, *budget);
    let v = p.value(0).filter(|_| !p.cut);
    *budget = p.budget;
    (v, p.i)
}

/// Offset of the first byte at or after `i` that is not white space or a comment.
pub(super) fn skip_blank(src: &str, i: usize) -> usize {
    let vars = Vars::new();
    let mut p = Parser::new(src, i, &vars, 0);
    p.blank();
    p.i
}

/// Offset just after the quoted string starting at `i` (or the end of the text if unterminated).
pub(super) fn skip_string(src: &str, i: usize) -> usize {
    read_string(src, i).1
}

/// The quoted string starting at `i` (`None` if unterminated or a template with `${}`) and the
/// offset just after it.
pub(super) fn read_string(src: &str, i: usize) -> (Option<String>, usize) {
    let vars = Vars::new();
    let mut p = Parser::new(src, i, &vars, 0);
    let s = p.string();
    (s, p.i)
}

/// The identifier starting at `i` (empty if none) and the offset just after it.
pub(super) fn ident_at(src: &str, i: usize) -> (&str, usize) {
    let b = src.as_bytes();
    let mut end = i;
    if b.get(i).copied().is_some_and(is_ident_start) {
        while b.get(end).copied().is_some_and(is_ident_char) {
            end = end.saturating_add(1);
        }
    }
    (src.get(i..end).unwrap_or(""), end)
}

/// Offset just after the `)` that closes a call whose arguments start at `i`.
pub(super) fn skip_call_args(src: &str, i: usize) -> usize {
    let vars = Vars::new();
    let mut p = Parser::new(src, i, &vars, 0);
    while !p.eof() {
        p.skip_expr();
        let c = p.peek();
        p.i = p.i.saturating_add(1);
        if c == b')' {
            break;
        }
    }
    p.i
}

/// Whether `c` can start a JavaScript identifier (non-ASCII bytes are taken as letters).
pub(super) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

/// Whether `c` can continue a JavaScript identifier.
fn is_ident_char(c: u8) -> bool {
    is_ident_start(c) || c.is_ascii_digit()
}

/// Number of nodes in `v` (long strings count extra) and its nesting depth, counting stops
/// soon after `limit` is passed.
fn value_size(v: &Value, limit: usize) -> (usize, usize) {
    let (mut n, mut deepest) = (0usize, 0usize);
    let mut stack = vec![(v, 1usize)];
    while let Some((x, d)) = stack.pop() {
        deepest = deepest.max(d);
        n = n.saturating_add(1);
        if n > limit {
            break;
        }
        match x {
            Value::String(s) => n = n.saturating_add(s.len() / 32),
            Value::Array(a) => stack.extend(a.iter().map(|e| (e, d.saturating_add(1)))),
            Value::Object(m) => {
                for (k, e) in m {
                    n = n.saturating_add(k.len() / 32);
                    stack.push((e, d.saturating_add(1)));
                }
            }
            _ => {}
        }
    }
    (n, deepest)
}

/// A cursor over the script's bytes.
struct Parser<'a> {
    /// The script text as bytes.
    s: &'a [u8],
    /// Current offset.
    i: usize,
    /// Literal variables that identifiers may name.
    vars: &'a Vars,
    /// Value nodes still allowed to be built.
    budget: usize,
    /// Whether the text ended inside a string, array or object.
    cut: bool,
}

impl<'a> Parser<'a> {
    /// A cursor at `i` of `src`.
    fn new(src: &'a str, i: usize, vars: &'a Vars, budget: usize) -> Self {
        Parser {
            s: src.as_bytes(),
            i,
            vars,
            budget,
            cut: false,
        }
    }

    /// The byte at `i`, or 0 past the end.
    fn at(&self, i: usize) -> u8 {
        self.s.get(i).copied().unwrap_or(0)
    }

    /// The current byte, or 0 at the end.
    fn peek(&self) -> u8 {
        self.at(self.i)
    }

    /// Whether the cursor is at the end.
    fn eof(&self) -> bool {
        self.i >= self.s.len()
    }

    /// Moves past `n` bytes.
    fn bump(&mut self, n: usize) {
        self.i = self.i.saturating_add(n);
    }

    /// Whether the text at the cursor starts with `pat`.
    fn looking_at(&self, pat: &[u8]) -> bool {
        self.s.get(self.i..).is_some_and(|r| r.starts_with(pat))
    }

    /// Uses up `n` nodes of the budget; false (and the budget emptied) if there are not enough.
    fn charge(&mut self, n: usize) -> bool {
        match self.budget.checked_sub(n) {
            Some(left) => {
                self.budget = left;
                true
            }
            None => {
                self.budget = 0;
                false
            }
        }
    }

    /// Skips white space and comments; tells whether a line break was passed.
    fn blank(&mut self) -> bool {
        let mut newline = false;
        loop {
            match self.peek() {
                b'\n' => {
                    newline = true;
                    self.bump(1);
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => self.bump(1),
                0xc2 if self.at(self.i.saturating_add(1)) == 0xa0 => self.bump(2),
                b'/' if self.at(self.i.saturating_add(1)) == b'/' => {
                    while !self.eof() && self.peek() != b'\n' {
                        self.bump(1);
                    }
                }
                b'/' if self.at(self.i.saturating_add(1)) == b'*' => {
                    self.bump(2);
                    while !self.eof() && !self.looking_at(b"*/") {
                        newline |= self.peek() == b'\n';
                        self.bump(1);
                    }
                    self.bump(2);
                }
                _ => return newline,
            }
        }
    }

    /// Skips an expression: balanced brackets, strings and comments, up to the next `,` or `;`
    /// or unmatched closing bracket at depth zero (which is not consumed).
    fn skip_expr(&mut self) {
        let mut depth = 0usize;
        while !self.eof() {
            match self.peek() {
                b'(' | b'[' | b'{' => {
                    depth = depth.saturating_add(1);
                    self.bump(1);
                }
                b')' | b']' | b'}' => match depth.checked_sub(1) {
                    Some(d) => {
                        depth = d;
                        self.bump(1);
                    }
                    None => return,
                },
                b',' | b';' if depth == 0 => return,
                b'"' | b'\'' | b'`' => {
                    self.string();
                }
                b'/' if matches!(self.at(self.i.saturating_add(1)), b'/' | b'*') => {
                    self.blank();
                }
                _ => self.bump(1),
            }
        }
    }

    /// Reads an identifier at the cursor (empty if there is none).
    fn ident(&mut self) -> &'a str {
        let start = self.i;
        if is_ident_start(self.peek()) {
            while is_ident_char(self.peek()) {
                self.bump(1);
            }
        }
        let s: &'a [u8] = self.s;
        s.get(start..self.i)
            .and_then(|b| std::str::from_utf8(b).ok())
            .unwrap_or("")
    }

    /// Reads a value at nesting `depth`; `None` when it is not a literal (it is skipped then).
    fn value(&mut self, depth: usize) -> Option<Value> {
        self.blank();
        if depth > MAX_DEPTH {
            self.skip_expr();
            return None;
        }
        let v = match self.peek() {
            b'{' => Some(self.object(depth)),
            b'[' => Some(self.array(depth)),
            b'"' | b'\'' | b'`' => self.string().map(Value::String),
            b'0'..=b'9' | b'.' | b'-' | b'+' => self.number(),
            c if is_ident_start(c) => self.ident_value(depth),
            _ => None,
        };
        let newline = self.blank();
        let c = self.peek();
        let ended = self.eof()
            || matches!(c, b',' | b'}' | b']' | b')' | b';')
            || (newline && is_ident_start(c));
        if v.is_some() && ended {
            return v;
        }
        self.skip_expr();
        None
    }

    /// Reads an array literal (the cursor is on `[`).
    fn array(&mut self, depth: usize) -> Value {
        self.bump(1);
        let mut out = Vec::new();
        loop {
            self.blank();
            if self.eof() {
                self.cut = true;
                break;
            }
            match self.peek() {
                b']' => {
                    self.bump(1);
                    break;
                }
                b',' => {
                    if self.charge(1) {
                        out.push(Value::Null);
                    }
                    self.bump(1);
                    continue;
                }
                _ if self.looking_at(b"...") => {
                    self.bump(3);
                    if let Some(Value::Array(items)) = self.value(depth.saturating_add(1)) {
                        out.extend(items);
                    }
                }
                _ => {
                    let v = self.value(depth.saturating_add(1)).unwrap_or(Value::Null);
                    if self.charge(1) {
                        out.push(v);
                    }
                }
            }
            self.blank();
            match self.peek() {
                b']' => {
                    self.bump(1);
                    break;
                }
                _ => self.bump(1),
            }
        }
        Value::Array(out)
    }

    /// Reads an object literal (the cursor is on `{`).
    fn object(&mut self, depth: usize) -> Value {
        self.bump(1);
        let mut map = Map::new();
        loop {
            self.blank();
            if self.eof() {
                self.cut = true;
                break;
            }
            match self.peek() {
                b'}' => {
                    self.bump(1);
                    break;
                }
                b',' => {
                    self.bump(1);
                    continue;
                }
                _ if self.looking_at(b"...") => {
                    self.bump(3);
                    if let Some(Value::Object(m)) = self.value(depth.saturating_add(1)) {
                        map.extend(m);
                    }
                }
                _ => self.member(depth, &mut map),
            }
            self.blank();
            match self.peek() {
                b'}' => {
                    self.bump(1);
                    break;
                }
                _ => self.bump(1),
            }
        }
        Value::Object(map)
    }

    /// Reads one `key: value` (or shorthand `key`) member into `map`; methods, getters and
    /// computed keys are skipped.
    fn member(&mut self, depth: usize, map: &mut Map<String, Value>) {
        let key = match self.peek() {
            b'"' | b'\'' | b'`' => self.string(),
            b'0'..=b'9' | b'.' => self.number().map(|n| match n {
                Value::String(s) => s,
                other => other.to_string(),
            }),
            c if is_ident_start(c) => Some(self.ident().to_string()),
            _ => None,
        };
        self.blank();
        match (key, self.peek()) {
            (Some(k), b':') => {
                self.bump(1);
                let v = self.value(depth.saturating_add(1)).unwrap_or(Value::Null);
                if self.charge(1) {
                    map.insert(k, v);
                }
            }
            (Some(k), b',' | b'}') => {
                let v = self.lookup(&k, depth).unwrap_or(Value::Null);
                map.insert(k, v);
            }
            _ => self.skip_expr(),
        }
    }

    /// A copy of variable `name`, if it is known and its copy fits the budget and depth cap.
    fn lookup(&mut self, name: &str, depth: usize) -> Option<Value> {
        let v = self.vars.get(name)?;
        self.copy_of(v, depth)
    }

    /// A copy of `v` placed at `depth`, if it fits the budget and depth cap.
    fn copy_of(&mut self, v: &Value, depth: usize) -> Option<Value> {
        let (size, deep) = value_size(v, self.budget);
        if depth.saturating_add(deep) > MAX_DEPTH.saturating_add(1) || !self.charge(size) {
            return None;
        }
        Some(v.clone())
    }

    /// Reads a quoted string (`'`, `"` or a template without `${}`); `None` if unterminated.
    fn string(&mut self) -> Option<String> {
        let quote = self.peek();
        self.bump(1);
        let mut buf: Vec<u8> = Vec::new();
        loop {
            if self.eof() {
                self.cut = true;
                return None;
            }
            let c = self.peek();
            self.bump(1);
            if c == quote {
                break;
            }
            match c {
                b'\\' => self.escape(&mut buf)?,
                b'\n' if quote != b'`' => return None,
                b'$' if quote == b'`' && self.peek() == b'{' => {
                    while !self.eof() && self.peek() != b'`' {
                        if self.peek() == b'\\' {
                            self.bump(1);
                        }
                        self.bump(1);
                    }
                    self.bump(1);
                    return None;
                }
                _ => buf.push(c),
            }
        }
        Some(match String::from_utf8(buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// Reads the escape after a `\` into `buf`; `None` at the end of the text.
    fn escape(&mut self, buf: &mut Vec<u8>) -> Option<()> {
        if self.eof() {
            return None;
        }
        let e = self.peek();
        self.bump(1);
        let ch = match e {
            b'n' => '\n',
            b't' => '\t',
            b'r' => '\r',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'v' => '\u{b}',
            b'0' => '\0',
            b'x' => self.hex(2).and_then(char::from_u32).unwrap_or('\u{fffd}'),
            b'u' => self.unicode_escape(),
            b'\r' => {
                if self.peek() == b'\n' {
                    self.bump(1);
                }
                return Some(());
            }
            b'\n' => return Some(()),
            other => {
                buf.push(other);
                return Some(());
            }
        };
        let mut tmp = [0u8; 4];
        buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
        Some(())
    }

    /// Reads the rest of a `\u` escape (`XXXX`, a surrogate pair, or `{X...}`).
    fn unicode_escape(&mut self) -> char {
        if self.peek() == b'{' {
            self.bump(1);
            let start = self.i;
            while self.peek().is_ascii_hexdigit() && self.i.saturating_sub(start) < 6 {
                self.bump(1);
            }
            let code = self
                .s
                .get(start..self.i)
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|t| u32::from_str_radix(t, 16).ok());
            if self.peek() == b'}' {
                self.bump(1);
            }
            return code.and_then(char::from_u32).unwrap_or('\u{fffd}');
        }
        let Some(hi) = self.hex(4) else {
            return '\u{fffd}';
        };
        if (0xd800..0xdc00).contains(&hi) && self.looking_at(b"\\u") {
            let save = self.i;
            self.bump(2);
            if let Some(lo) = self.hex(4).filter(|lo| (0xdc00..0xe000).contains(lo)) {
                let code = 0x10000u32.saturating_add(((hi & 0x3ff) << 10) | (lo & 0x3ff));
                return char::from_u32(code).unwrap_or('\u{fffd}');
            }
            self.i = save;
        }
        char::from_u32(hi).unwrap_or('\u{fffd}')
    }

    /// Reads exactly `n` hex digits.
    fn hex(&mut self, n: usize) -> Option<u32> {
        let text = self.s.get(self.i..self.i.saturating_add(n))?;
        let text = std::str::from_utf8(text).ok()?;
        let v = u32::from_str_radix(text, 16).ok()?;
        self.bump(n);
        Some(v)
    }

    /// Reads a number (`-5`, `.5`, `1e3`, `0x1f`); `None` if it is malformed.
    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        if matches!(self.peek(), b'-' | b'+') {
            self.bump(1);
        }
        let negative = self.at(start) == b'-';
        if self.peek() == b'0' && matches!(self.at(self.i.saturating_add(1)), b'x' | b'X') {
            self.bump(2);
            let digits = self.i;
            while self.peek().is_ascii_hexdigit() {
                self.bump(1);
            }
            let text = std::str::from_utf8(self.s.get(digits..self.i)?).ok()?;
            let v = i64::from_str_radix(text, 16).ok()?;
            return Some(Value::from(if negative { v.saturating_neg() } else { v }));
        }
        let mut text = String::from(if negative { "-" } else { "" });
        while let c @ (b'0'..=b'9' | b'.' | b'e' | b'E' | b'_' | b'-' | b'+') = self.peek() {
            let exponent_sign = matches!(self.at(self.i.saturating_sub(1)), b'e' | b'E');
            if matches!(c, b'-' | b'+') && !exponent_sign {
                break;
            }
            if c != b'_' {
                text.push(char::from(c));
            }
            self.bump(1);
        }
        if let Ok(v) = text.parse::<i64>() {
            return Some(Value::from(v));
        }
        let v = text.parse::<f64>().ok().filter(|v| v.is_finite())?;
        Number::from_f64(v).map(Value::Number)
    }

    /// Reads a keyword or an identifier (with `.member` lookups) naming a literal variable.
    fn ident_value(&mut self, depth: usize) -> Option<Value> {
        let name = self.ident();
        match name {
            "true" => return Some(Value::Bool(true)),
            "false" => return Some(Value::Bool(false)),
            "null" | "undefined" | "NaN" | "Infinity" => return Some(Value::Null),
            _ => {}
        }
        let vars = self.vars;
        let mut cur = vars.get(name)?;
        while self.peek() == b'.' && is_ident_start(self.at(self.i.saturating_add(1))) {
            self.bump(1);
            let member = self.ident();
            cur = cur.get(member)?;
        }
        self.copy_of(cur, depth)
    }
}
