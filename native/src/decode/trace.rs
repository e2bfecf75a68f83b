//! A Java stack trace's exception and root cause: `offsetd.events.decode.first_line`,
//! `last_cause` and `trace_fields`, without regexes.
//!
//! The two patterns are simple enough that their every match can be written out (greedy
//! `[\w.$]+` then `:` or the end), which is both faster than a regex engine and free of
//! the `regex` crate's different idea of `\w` and `\s` (Python's are `text::is_word`,
//! `text::is_space`).

use super::text::{is_line_boundary, is_space, is_word, strip};
use crate::event::ErrorInfo;

/// What Python's `TRACE_HEAD_CHARS` is: a trace is read in its first 4096 code points.
pub const TRACE_HEAD_CHARS: usize = 4096;

fn class_char(c: char) -> bool {
    is_word(c) || c == '.' || c == '$'
}

/// The length in bytes of the `[\w.$]+` run at the start of `text` (0: none).
fn class_run(text: &str) -> usize {
    text.find(|c| !class_char(c)).unwrap_or(text.len())
}

fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// `first_line(head)`: the outermost exception's class and message, from the first line
/// (cut at `\n`, then at any `str.splitlines()` boundary), stripped, fully matched by
/// `([\w.$]+)(?::\s*(.*))?`.
pub fn first_line(head: &str) -> (Option<&str>, Option<&str>) {
    let line = head.split('\n').next().unwrap_or("");
    if line.is_empty() {
        return (None, None); // `"".splitlines()` is empty
    }
    let first = match line.find(is_line_boundary) {
        Some(at) => &line[..at],
        None => line,
    };
    let text = strip(first);
    let run = class_run(text);
    if run == 0 {
        return (None, None);
    }
    let rest = &text[run..];
    if rest.is_empty() {
        return (Some(text), None);
    }
    match rest.strip_prefix(':') {
        Some(message) => (
            Some(&text[..run]),
            non_empty(message.trim_start_matches(is_space)),
        ),
        None => (None, None),
    }
}

const CAUSED_BY: &str = "Caused by: ";

/// `_CAUSE.match(head, at)`: `Caused by: ([\w.$]+)(?::[^\S\n]*(.*))?\r?$` (MULTILINE) at a
/// line that starts with `Caused by: `; the class and the message (`\r` off its end, None
/// if empty), or None when the line is not of that shape.
fn cause_at(line_start: &str) -> Option<(&str, Option<&str>)> {
    let rest = line_start.strip_prefix(CAUSED_BY)?;
    let line = rest.split('\n').next().unwrap_or("");
    let run = class_run(line);
    if run == 0 {
        return None;
    }
    let after = &line[run..];
    if let Some(message) = after.strip_prefix(':') {
        let message = message.trim_start_matches(is_space).trim_end_matches('\r');
        return Some((&line[..run], non_empty(message)));
    }
    (after.is_empty() || after == "\r").then_some((&line[..run], None))
}

/// `last_cause(head)`: the last line starting with `Caused by: ` that is well formed, searched
/// backwards (the head's own first line last of all).
pub fn last_cause(head: &str) -> Option<(&str, Option<&str>)> {
    let mut end = head.len();
    while let Some(at) = head[..end].rfind("\nCaused by: ") {
        if let Some(found) = cause_at(&head[at + 1..]) {
            return Some(found);
        }
        end = at;
    }
    cause_at(head)
}

/// `trace_fields(head)` as an `ErrorInfo` (`parse_trace`): `head` is already cut to
/// `TRACE_HEAD_CHARS` code points and not empty.
pub fn trace_error(head: &str) -> ErrorInfo {
    let (first_class, first_message) = first_line(head);
    let (root_class, root_message) = match last_cause(head) {
        Some((class, message)) => (Some(class), message),
        None => (first_class, first_message),
    };
    ErrorInfo {
        exception_class: first_class.map(str::to_owned),
        message: first_message.map(str::to_owned),
        root_cause_class: root_class.map(str::to_owned),
        root_cause_message: root_message.map(str::to_owned),
        stage: None,
        executing_class: None,
        trace_head: head.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_as_python_finds_them() {
        let head = "x.Outer: top\r\n\tat a.B(B.java:1)\r\nCaused by: y.Inner\r\n";
        assert_eq!(first_line(head), (Some("x.Outer"), Some("top")));
        assert_eq!(last_cause(head), Some(("y.Inner", None)));
        let head = "x.Outer: top\nCaused by: y.Inner: \n\tat a.B.c(B.java:1)\nCaused by: bad line";
        assert_eq!(last_cause(head), Some(("y.Inner", None)));
        assert_eq!(last_cause("Caused by: a.B: m"), Some(("a.B", Some("m"))));
        assert_eq!(first_line("bad line"), (None, None));
        assert_eq!(first_line("\rx"), (None, None));
    }
}
