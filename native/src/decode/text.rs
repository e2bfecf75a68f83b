//! Python's `str` semantics the decoders rely on: code point slicing, `str.strip()`,
//! `str.splitlines()` line boundaries, `re`'s Unicode `\w` and `\s`, and `number`.
//!
//! Python counts and slices by code points; Rust strings are UTF-8 bytes. Each helper here
//! answers what the Python expression answers, so the decoders read like the Python they follow.

use super::unicode_tables::{SPACE, WORD};

fn in_ranges(table: &[(u32, u32)], c: char) -> bool {
    let code = c as u32;
    table
        .binary_search_by(|&(low, high)| {
            if high < code {
                std::cmp::Ordering::Less
            } else if low > code {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// `data.decode("utf-8")` (strict): the text, or None where Python raises. `simdutf8` checks
/// what `std::str::from_utf8` checks (no surrogates, no overlong forms, nothing past
/// U+10FFFF, as Python's codec), several times faster on the kilobytes of a trace.
pub fn utf8(data: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(data).ok()
}

/// `re`'s `\w` for a `str` pattern: `c.isalnum() or c == "_"` (Unicode, not ASCII only).
pub fn is_word(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric() || c == '_';
    }
    in_ranges(WORD, c)
}

/// `re`'s `\s` for a `str` pattern, and what `str.strip()` removes (`str.isspace()`).
pub fn is_space(c: char) -> bool {
    if c.is_ascii() {
        return matches!(c, '\t'..='\r' | '\x1c'..=' ');
    }
    in_ranges(SPACE, c)
}

/// A line boundary of `str.splitlines()` (`\r\n` is one, but starts with `\r`, also one).
pub fn is_line_boundary(c: char) -> bool {
    matches!(
        c,
        '\n' | '\x0b'
            | '\x0c'
            | '\r'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// `text[:chars]`: the first `chars` code points (all of `text` if shorter).
pub fn head_chars(text: &str, chars: usize) -> &str {
    if text.len() <= chars {
        return text; // fewer bytes than code points asked: all of it
    }
    if text.as_bytes()[..chars].is_ascii() {
        return &text[..chars]; // the common case: ASCII, a byte a code point
    }
    match text.char_indices().nth(chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// `text.strip()` with no argument: Python's whitespace off both ends.
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// `offsetd.events.decode.number`: a non-negative decimal of at most 19 ASCII digits (Java's
/// `String.valueOf`, leading zeros allowed) no greater than `maximum`, else None.
pub fn number(text: &str, maximum: i64) -> Option<i64> {
    if text.is_empty() || text.len() > 19 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: u64 = text.parse().ok()?; // 19 digits fit a u64
    let value = i64::try_from(value).ok()?;
    (value <= maximum).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_numbers_as_python() {
        assert_eq!(head_chars("héllo", 2), "hé");
        assert_eq!(head_chars("ab", 5), "ab");
        assert_eq!(strip("\u{3000} a b\u{85}\t"), "a b");
        assert_eq!(number("007", 10), Some(7));
        assert_eq!(number("9999999999999999999", i64::MAX), None);
        assert_eq!(number("+1", 10), None);
        assert_eq!(number("", 10), None);
        assert!(is_word('é') && is_word('_') && !is_word('$') && !is_word('-'));
        assert!(is_space('\x1f') && !is_space('\u{200b}'));
    }
}
