//! Text as Python's `json.dumps` writes it (the audit's bytes, `offsetd.engine.decision.audit_json`):
//! `", "` and `": "` separators, and `ensure_ascii` escapes (every character outside printable
//! ASCII as `\uXXXX`, lower-case hex, astral ones as surrogate pairs).

use std::fmt::Write as _;

/// A JSON string literal as `json.dumps` writes it.
pub fn push_str(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// An optional string: `null` or its literal.
pub fn push_opt_str(out: &mut String, text: Option<&str>) {
    match text {
        Some(t) => push_str(out, t),
        None => out.push_str("null"),
    }
}

/// `"key": ` (the key as a literal, then Python's separator).
pub fn push_key(out: &mut String, key: &str) {
    push_str(out, key);
    out.push_str(": ");
}
