//! The `message` condition (`offsetd.rules.conditions._message`, `patterns.any_regex`):
//! searched in the error's message, root cause message and trace head.
//!
//! Mirrored step for step, because the steps are not all the same language: plain-text
//! patterns (no regex syntax, optionally after `(?i)`) are substring tests, the `(?i)` ones on
//! Python's `str.lower()` of the text; as soon as one pattern is a regex, all of them run as
//! one RE2 alternation, behind the prefilter Python computes from its own parse of them
//! (`_required_literals`, exported with the rule: the same literals, whatever they mean).

use memchr::memmem;
use serde::Deserialize;

use crate::event::ErrorInfo;
use crate::matcher::names::search_regex;

/// `_REGEX_SYNTAX`: a pattern with none of these (after `(?i)`) is plain text.
const REGEX_SYNTAX: &[char] = &[
    '.', '^', '$', '*', '+', '?', '{', '}', '[', ']', '\\', '|', '(', ')',
];
const IGNORE_CASE: &str = "(?i)";

/// `_required_literals(patterns)` as Python found them (None: the regex always runs).
#[derive(Deserialize, Debug, Clone)]
pub struct Required {
    pub plain: Vec<String>,
    pub folded: Vec<String>,
}

#[derive(Debug, Clone)]
enum Search {
    /// `_substrings(plain, folded)`: `folded` lower-cased, ASCII.
    Substrings {
        plain: Vec<String>,
        folded: Vec<String>,
    },
    Regex {
        regex: regex::Regex,
        required: Option<Required>,
    },
}

#[derive(Debug, Clone)]
pub struct MessageMatcher {
    search: Search,
}

impl MessageMatcher {
    pub fn new(patterns: &[String], required: Option<Required>) -> Result<MessageMatcher, String> {
        let mut plain = Vec::new();
        let mut folded = Vec::new();
        let mut any_regex = false;
        for pattern in patterns {
            let body = pattern.strip_prefix(IGNORE_CASE).unwrap_or(pattern);
            if body.contains(REGEX_SYNTAX) {
                any_regex = true;
            } else if pattern.starts_with(IGNORE_CASE) {
                if !body.is_ascii() {
                    return Err(format!(
                        "message {pattern:?}: (?i) plain text beyond ASCII is compared with \
                         Python's str.lower() of the trace, which is not carried over"
                    ));
                }
                folded.push(body.to_ascii_lowercase());
            } else {
                plain.push(body.to_string());
            }
        }
        let search = if any_regex {
            if let Some(req) = &required {
                if req.folded.iter().any(|f| !f.is_ascii()) {
                    return Err("message prefilter literals beyond ASCII".to_string());
                }
            }
            Search::Regex {
                regex: search_regex(patterns)?,
                required,
            }
        } else {
            Search::Substrings { plain, folded }
        };
        Ok(MessageMatcher { search })
    }

    /// `substrings_only(patterns)`: which texts are searched (`_texts` or `_every_text`).
    fn substrings_only(&self) -> bool {
        matches!(self.search, Search::Substrings { .. })
    }

    /// The condition on an error: any of its texts holds a match.
    pub fn matches(&self, error: &ErrorInfo) -> bool {
        let head = error.trace_head.as_str();
        let message = error.message.as_deref().unwrap_or("");
        let root = error.root_cause_message.as_deref().unwrap_or("");
        if self.substrings_only() {
            // `_texts`: the head, plus the messages it does not contain
            (!head.is_empty() && self.found(head))
                || [message, root]
                    .into_iter()
                    .any(|t| !t.is_empty() && !head.contains(t) && self.found(t))
        } else {
            [message, root, head]
                .into_iter()
                .any(|t| !t.is_empty() && self.found(t))
        }
    }

    fn found(&self, value: &str) -> bool {
        match &self.search {
            Search::Substrings { plain, folded } => {
                plain.iter().any(|p| value.contains(p.as_str()))
                    || (!folded.is_empty() && {
                        let lowered = lowered(value);
                        folded
                            .iter()
                            .any(|f| memmem::find(&lowered, f.as_bytes()).is_some())
                    })
            }
            Search::Regex { regex, required } => {
                let Some(req) = required else {
                    return regex.is_match(value);
                };
                if req.plain.iter().any(|p| value.contains(p.as_str())) {
                    return regex.is_match(value);
                }
                if !req.folded.is_empty() {
                    if !value.is_ascii() {
                        return regex.is_match(value); // Unicode case folding: no shortcut
                    }
                    let lowered = value.to_ascii_lowercase();
                    if req.folded.iter().any(|f| lowered.contains(f.as_str())) {
                        return regex.is_match(value);
                    }
                }
                false
            }
        }
    }
}

/// Python's `value.lower()` as far as an ASCII literal can tell: ASCII lower-cased, KELVIN
/// SIGN to `k`, `İ` to `i` and a combining dot, and every other non-ASCII character to
/// something that is not ASCII (a 0xFF byte: no ASCII literal spans it). No other character's
/// lower case holds an ASCII one (the tests check this on every code point of this Python).
fn lowered(value: &str) -> std::borrow::Cow<'_, [u8]> {
    if value.is_ascii() {
        return std::borrow::Cow::Owned(value.as_bytes().to_ascii_lowercase());
    }
    let mut out = Vec::with_capacity(value.len());
    for c in value.chars() {
        match c {
            c if c.is_ascii() => out.push(c.to_ascii_lowercase() as u8),
            '\u{212A}' => out.push(b'k'),
            '\u{0130}' => out.extend_from_slice(&[b'i', 0xFF]),
            _ => out.push(0xFF),
        }
    }
    std::borrow::Cow::Owned(out)
}
