//! Text as Python's `json.dumps` writes it (the audit's bytes, `offsetd.engine.decision.audit_json`):
//! `", "` and `": "` separators, and `ensure_ascii` escapes (every character outside printable
//! ASCII as `\uXXXX`, lower-case hex, astral ones as surrogate pairs).

use std::fmt::Write as _;

/// A JSON string literal as `json.dumps` writes it.
pub fn push_str(out: &mut String, text: &str) {
    out.push('"');
    // Most text is printable ASCII without quotes or backslashes: copied in one piece.
    let plain = text
        .bytes()
        .position(|b| !(b' '..=b'~').contains(&b) || b == b'"' || b == b'\\');
    let text = match plain {
        None => {
            out.push_str(text);
            out.push('"');
            return;
        }
        Some(at) => {
            out.push_str(&text[..at]);
            &text[at..]
        }
    };
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

/// A float as Python's `repr` writes it (what `json.dumps` writes): the shortest digits that
/// read back, positional from 1e-4 up to 1e16 with at least one decimal (`2.0`), else in
/// exponent form with a signed exponent of at least two digits (`1e+16`, `1.5e-05`).
pub fn push_float(out: &mut String, value: f64) {
    if value.is_nan() {
        out.push_str("NaN");
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 { "Infinity" } else { "-Infinity" });
        return;
    }
    let size = value.abs();
    if size != 0.0 && !(1e-4..1e16).contains(&size) {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exponent.strip_prefix('-') {
            Some(digits) => ('-', digits),
            None => ('+', exponent),
        };
        let _ = write!(out, "{mantissa}e{sign}{digits:0>2}");
        return;
    }
    let start = out.len();
    let _ = write!(out, "{value}");
    if !out[start..].contains('.') {
        out.push_str(".0");
    }
}

/// A JSON value as `json.dumps` writes it (keys in their order: serde_json's
/// `preserve_order`).
pub fn push_value(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => match (number.as_i64(), number.as_u64(), number.as_f64()) {
            (Some(i), _, _) => {
                let _ = write!(out, "{i}");
            }
            (None, Some(u), _) => {
                let _ = write!(out, "{u}");
            }
            (None, None, Some(f)) => push_float(out, f),
            _ => out.push_str("null"),
        },
        Value::String(text) => push_str(out, text),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_key(out, key);
                push_value(out, item);
            }
            out.push('}');
        }
    }
}
