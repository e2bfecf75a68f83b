//! Rules' regexes are RE2's (`offsetd.saferegex`, google-re2, UTF-8, Perl-like options). The
//! `regex` crate has RE2's guarantees and most of its syntax, but not all of it, and some of
//! the same spellings mean other things there (`\<`, `[a&&b]`, nested sets, Unicode `\d\w\s\b`,
//! `\s` with `\v`). So a pattern is not handed over as it is: it is parsed here as RE2's parser
//! (re2/parse.cc) reads it and written again in a canonical spelling whose meaning in the
//! `regex` crate is the same language: every literal as `\x{..}`, every set as explicit
//! ranges, Perl and POSIX classes as their ASCII ranges, `\b` as the ASCII boundary, groups as
//! non-capturing (captures do not change whether it matches). Whatever is not argued equal
//! here is refused, with the reason:
//!
//! - `\p{..}`, `\pL`, `\P..` (Unicode tables of two versions), `\C` (a byte), `\Q..\E`, `\B`
//!   (RE2 may find it inside a multi-byte character, the crate never does);
//! - case folding (`i` flag anywhere in the pattern) together with a non-ASCII character or
//!   range end, or with a negated Perl/POSIX class inside a set (RE2 folds those in two
//!   steps): fold tables differ between Unicode versions beyond ASCII;
//! - a repetition of an assertion or right after a flags group, a surrogate literal;
//! - anything RE2 itself refuses (those never load).
//!
//! Within what is accepted the two agree: RE2's `^`/`$` are the text's ends unless `m` (the
//! crate's too), `.` excludes `\n` unless `s` (the same), sets and negated sets include `\n`
//! (ClassNL; the same), flags last to the end of their group across `|` (the same), and
//! folding of ASCII literals and ranges follows the same simple case folding orbits (`k`, `K`,
//! KELVIN SIGN; `s`, `S`, LONG S). The tests hold each of these against google-re2.

/// An RE2 pattern rewritten for the `regex` crate (one alternative, to be wrapped in a group).
pub fn translate(pattern: &str) -> Result<String, String> {
    let mut parser = Parser {
        chars: pattern.chars().collect(),
        at: 0,
        out: String::with_capacity(pattern.len() * 4),
        depth: 0,
        last: Last::Start,
        saw_fold_flag: false,
        saw_non_ascii: false,
        saw_negated_in_set: false,
    };
    parser
        .run()
        .map_err(|why| format!("regex {pattern:?}: {why}"))?;
    if parser.saw_fold_flag && (parser.saw_non_ascii || parser.saw_negated_in_set) {
        return Err(format!(
            "regex {pattern:?}: case folding (the i flag) with non-ASCII characters or a \
             negated class inside a set: RE2's and the regex crate's Unicode fold tables may \
             differ"
        ));
    }
    Ok(parser.out)
}

/// What the output ends with, for where a repetition may follow.
#[derive(PartialEq, Eq, Clone, Copy)]
enum Last {
    Start,     // the start, or just after `(` or `|`: nothing to repeat (RE2 refuses)
    Atom,      // something a repetition applies to
    Assertion, // an empty-width assertion (refused under a repetition)
    Flags,     // a flags group `(?i)` (RE2 would repeat what came before it: refused)
    Repeat,    // a repetition (RE2 refuses stacking them)
}

struct Parser {
    chars: Vec<char>,
    at: usize,
    out: String,
    depth: usize,
    last: Last,
    saw_fold_flag: bool,
    saw_non_ascii: bool,
    saw_negated_in_set: bool,
}

const ASCII_DIGIT: &[(u32, u32)] = &[(0x30, 0x39)];
const ASCII_SPACE: &[(u32, u32)] = &[(0x09, 0x0A), (0x0C, 0x0D), (0x20, 0x20)]; // no \v
const ASCII_WORD: &[(u32, u32)] = &[(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)];
const MAX_RUNE: u32 = 0x10FFFF;

/// RE2's POSIX groups (re2/perl_groups.cc), ASCII.
fn posix_group(name: &str) -> Option<&'static [(u32, u32)]> {
    Some(match name {
        "alnum" => &[(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
        "alpha" => &[(0x41, 0x5A), (0x61, 0x7A)],
        "ascii" => &[(0x00, 0x7F)],
        "blank" => &[(0x09, 0x09), (0x20, 0x20)],
        "cntrl" => &[(0x00, 0x1F), (0x7F, 0x7F)],
        "digit" => &[(0x30, 0x39)],
        "graph" => &[(0x21, 0x7E)],
        "lower" => &[(0x61, 0x7A)],
        "print" => &[(0x20, 0x7E)],
        "punct" => &[(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
        "space" => &[(0x09, 0x0D), (0x20, 0x20)],
        "upper" => &[(0x41, 0x5A)],
        "word" => &[(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), (0x5F, 0x5F)],
        "xdigit" => &[(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
        _ => return None,
    })
}

fn perl_group(c: char) -> Option<(&'static [(u32, u32)], bool)> {
    Some(match c {
        'd' => (ASCII_DIGIT, false),
        'D' => (ASCII_DIGIT, true),
        's' => (ASCII_SPACE, false),
        'S' => (ASCII_SPACE, true),
        'w' => (ASCII_WORD, false),
        'W' => (ASCII_WORD, true),
        _ => return None,
    })
}

fn complement(ranges: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut out = Vec::new();
    let mut next = 0u32;
    for (lo, hi) in sorted {
        if lo > next {
            out.push((next, lo - 1));
        }
        next = next.max(hi + 1);
    }
    if next <= MAX_RUNE {
        out.push((next, MAX_RUNE));
    }
    out
}

/// `[...]` with explicit escaped ranges; surrogates (RE2 takes them as runes; no text holds
/// one) are cut out. A set left empty matches nothing (its negation: anything), as in RE2.
fn write_set(out: &mut String, negated: bool, ranges: &[(u32, u32)]) {
    let mut body = String::new();
    for &(lo, hi) in ranges {
        for (lo, hi) in [(lo, hi.min(0xD7FF)), (lo.max(0xE000), hi)] {
            if lo <= hi {
                body.push_str(&format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"));
            }
        }
    }
    if body.is_empty() {
        out.push_str(if negated {
            "[\\x{0}-\\x{10FFFF}]"
        } else {
            "[^\\x{0}-\\x{10FFFF}]"
        });
        return;
    }
    out.push('[');
    if negated {
        out.push('^');
    }
    out.push_str(&body);
    out.push(']');
}

fn write_literal(out: &mut String, c: char) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        out.push_str(&format!("\\x{{{:X}}}", c as u32));
    }
}

impl Parser {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn run(&mut self) -> Result<(), String> {
        while let Some(c) = self.peek(0) {
            match c {
                '(' => self.open()?,
                '|' => {
                    self.at += 1;
                    self.out.push('|');
                    self.last = Last::Start;
                }
                ')' => {
                    self.at += 1;
                    if self.depth == 0 {
                        return Err("unbalanced )".into());
                    }
                    self.depth -= 1;
                    self.out.push(')');
                    self.last = Last::Atom;
                }
                '^' | '$' => {
                    self.at += 1;
                    self.out.push(c);
                    self.last = Last::Assertion;
                }
                '.' => {
                    self.at += 1;
                    self.out.push('.');
                    self.last = Last::Atom;
                }
                '[' => {
                    self.set()?;
                    self.last = Last::Atom;
                }
                '*' | '+' | '?' => {
                    self.at += 1;
                    let mut op = c.to_string();
                    if self.peek(0) == Some('?') {
                        self.at += 1;
                        op.push('?');
                    }
                    self.repeat(&op)?;
                }
                '{' => match self.counted() {
                    Some((lo, hi)) => {
                        let mut op = match hi {
                            None => format!("{{{lo},}}"),
                            Some(hi) if hi == lo => format!("{{{lo}}}"),
                            Some(hi) => format!("{{{lo},{hi}}}"),
                        };
                        if hi.is_some_and(|hi| hi < lo) || lo > 1000 || hi.unwrap_or(0) > 1000 {
                            return Err("bad repetition count".into());
                        }
                        if self.peek(0) == Some('?') {
                            self.at += 1;
                            op.push('?');
                        }
                        self.repeat(&op)?;
                    }
                    None => {
                        self.at += 1;
                        write_literal(&mut self.out, '{');
                        self.last = Last::Atom;
                    }
                },
                '\\' => self.escape()?,
                other => {
                    self.at += 1;
                    self.literal(other)?;
                }
            }
        }
        if self.depth != 0 {
            return Err("missing )".into());
        }
        Ok(())
    }

    fn literal(&mut self, c: char) -> Result<(), String> {
        if !c.is_ascii() {
            self.saw_non_ascii = true;
        }
        if (0xD800..=0xDFFF).contains(&(c as u32)) {
            return Err("a surrogate".into());
        }
        write_literal(&mut self.out, c);
        self.last = Last::Atom;
        Ok(())
    }

    fn repeat(&mut self, op: &str) -> Result<(), String> {
        match self.last {
            Last::Atom => {
                self.out.push_str(op);
                self.last = Last::Repeat;
                Ok(())
            }
            Last::Repeat => Err("stacked repetition operators".into()),
            Last::Assertion => Err("a repetition of an assertion".into()),
            Last::Flags => Err("a repetition right after a flags group".into()),
            Last::Start => Err("a repetition with nothing to repeat".into()),
        }
    }

    /// RE2's `MaybeParseRepetition`: `{n}`, `{n,}`, `{n,m}` (no leading zeros); anything else
    /// leaves `{` a literal.
    fn counted(&mut self) -> Option<(u32, Option<u32>)> {
        let mut at = self.at + 1;
        let lo = self.integer(&mut at)?;
        let hi = match self.chars.get(at) {
            Some(',') => {
                at += 1;
                if self.chars.get(at) == Some(&'}') {
                    None
                } else {
                    Some(self.integer(&mut at)?)
                }
            }
            _ => Some(lo),
        };
        if self.chars.get(at) != Some(&'}') {
            return None;
        }
        self.at = at + 1;
        Some((lo, hi))
    }

    fn integer(&self, at: &mut usize) -> Option<u32> {
        let first = *self.chars.get(*at)?;
        if !first.is_ascii_digit() {
            return None;
        }
        if first == '0' && self.chars.get(*at + 1).is_some_and(char::is_ascii_digit) {
            return None;
        }
        let mut n: u32 = 0;
        while let Some(c) = self.chars.get(*at).filter(|c| c.is_ascii_digit()) {
            if n >= 100_000_000 {
                return None;
            }
            n = n * 10 + (*c as u32 - '0' as u32);
            *at += 1;
        }
        Some(n)
    }

    fn open(&mut self) -> Result<(), String> {
        if self.peek(1) != Some('?') {
            self.at += 1;
            self.out.push_str("(?:");
            self.depth += 1;
            self.last = Last::Start;
            return Ok(());
        }
        let named = (self.peek(2) == Some('P') && self.peek(3) == Some('<'))
            || (self.peek(2) == Some('<') && !matches!(self.peek(3), Some('=' | '!')));
        if named {
            let from = self.at + if self.peek(2) == Some('P') { 4 } else { 3 };
            let end = (from..self.chars.len())
                .find(|&i| self.chars[i] == '>')
                .ok_or("an unterminated group name")?;
            self.at = end + 1;
            self.out.push_str("(?:");
            self.depth += 1;
            self.last = Last::Start;
            return Ok(());
        }
        self.at += 2;
        let (mut on, mut off) = (String::new(), String::new());
        let mut negated = false;
        let mut saw = false;
        loop {
            let c = self.peek(0).ok_or("an unterminated flags group")?;
            self.at += 1;
            match c {
                'i' | 'm' | 's' | 'U' => {
                    if c == 'i' {
                        self.saw_fold_flag = true;
                    }
                    saw = true;
                    on.retain(|f| f != c);
                    off.retain(|f| f != c);
                    if negated { &mut off } else { &mut on }.push(c);
                }
                '-' if !negated => {
                    negated = true;
                    saw = false;
                }
                ':' | ')' => {
                    if negated && !saw {
                        return Err("a flags group with a bare -".into());
                    }
                    let flags = if off.is_empty() {
                        on
                    } else {
                        format!("{on}-{off}")
                    };
                    if c == ':' {
                        self.out.push_str(&format!("(?{flags}:"));
                        self.depth += 1;
                        self.last = Last::Start;
                    } else {
                        if !flags.is_empty() {
                            self.out.push_str(&format!("(?{flags})"));
                        }
                        self.last = Last::Flags;
                    }
                    return Ok(());
                }
                _ => return Err(format!("the group syntax (?{c}...")),
            }
        }
    }

    fn escape(&mut self) -> Result<(), String> {
        let c = self.peek(1).ok_or("a trailing backslash")?;
        match c {
            'b' => {
                self.at += 2;
                self.out.push_str("(?-u:\\b)");
                self.last = Last::Assertion;
                Ok(())
            }
            'A' | 'z' => {
                self.at += 2;
                self.out.push('\\');
                self.out.push(c);
                self.last = Last::Assertion;
                Ok(())
            }
            'B' | 'C' | 'Q' | 'p' | 'P' => Err(format!("\\{c} is not carried over")),
            _ => {
                if let Some((ranges, negated)) = perl_group(c) {
                    self.at += 2;
                    write_set(&mut self.out, negated, ranges);
                    self.last = Last::Atom;
                    return Ok(());
                }
                let rune = self.escaped_rune()?;
                self.literal_rune(rune)
            }
        }
    }

    fn literal_rune(&mut self, rune: u32) -> Result<(), String> {
        let c = char::from_u32(rune).ok_or("a surrogate")?;
        self.literal(c)
    }

    /// RE2's `ParseEscape` at `\`: octal, `\x`, the C escapes, escaped punctuation.
    fn escaped_rune(&mut self) -> Result<u32, String> {
        let c = self.peek(1).ok_or("a trailing backslash")?;
        self.at += 2;
        match c {
            '1'..='7' | '0' => {
                let octal = |c: Option<char>| c.filter(|c| ('0'..='7').contains(c));
                if c != '0' && octal(self.peek(0)).is_none() {
                    return Err("a backreference".into());
                }
                let mut code = c as u32 - '0' as u32;
                if let Some(d) = octal(self.peek(0)) {
                    code = code * 8 + (d as u32 - '0' as u32);
                    self.at += 1;
                    if let Some(d) = octal(self.peek(0)) {
                        code = code * 8 + (d as u32 - '0' as u32);
                        self.at += 1;
                    }
                }
                Ok(code)
            }
            'x' => {
                let first = self.peek(0).ok_or("a bad \\x escape")?;
                self.at += 1;
                if first == '{' {
                    let mut code: u32 = 0;
                    let mut digits = 0;
                    loop {
                        let d = self.peek(0).ok_or("a bad \\x escape")?;
                        self.at += 1;
                        match d.to_digit(16) {
                            Some(v) => {
                                digits += 1;
                                code = code * 16 + v;
                                if code > MAX_RUNE {
                                    return Err("a bad \\x escape".into());
                                }
                            }
                            None if d == '}' && digits > 0 => return Ok(code),
                            None => return Err("a bad \\x escape".into()),
                        }
                    }
                }
                let second = self.peek(0).ok_or("a bad \\x escape")?;
                self.at += 1;
                match (first.to_digit(16), second.to_digit(16)) {
                    (Some(a), Some(b)) => Ok(a * 16 + b),
                    _ => Err("a bad \\x escape".into()),
                }
            }
            'n' => Ok(0x0A),
            'r' => Ok(0x0D),
            't' => Ok(0x09),
            'a' => Ok(0x07),
            'f' => Ok(0x0C),
            'v' => Ok(0x0B),
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok(c as u32),
            c => Err(format!("the escape \\{c}")),
        }
    }

    /// RE2's `ParseCharClass`, written as explicit ranges.
    fn set(&mut self) -> Result<(), String> {
        self.at += 1; // '['
        let negated = self.peek(0) == Some('^');
        if negated {
            self.at += 1;
        }
        let mut ranges: Vec<(u32, u32)> = Vec::new();
        let mut first = true;
        loop {
            let c = self.peek(0).ok_or("a missing ]")?;
            if c == ']' && !first {
                self.at += 1;
                break;
            }
            first = false;
            if c == '[' && self.peek(1) == Some(':') {
                if let Some(end) = (self.at + 2..self.chars.len().saturating_sub(1))
                    .find(|&q| self.chars[q] == ':' && self.chars[q + 1] == ']')
                {
                    let name: String = self.chars[self.at + 2..end].iter().collect();
                    let (name, negated_group) = match name.strip_prefix('^') {
                        Some(rest) => (rest.to_string(), true),
                        None => (name, false),
                    };
                    let group = posix_group(&name).ok_or("an unknown POSIX class")?;
                    if negated_group {
                        self.saw_negated_in_set = true;
                        ranges.extend(complement(group));
                    } else {
                        ranges.extend_from_slice(group);
                    }
                    self.at = end + 2;
                    continue;
                }
            }
            if c == '\\' {
                if let Some(d) = self.peek(1) {
                    if matches!(d, 'p' | 'P') {
                        return Err(format!("\\{d} is not carried over"));
                    }
                    if let Some((group, negated_group)) = perl_group(d) {
                        self.at += 2;
                        if negated_group {
                            self.saw_negated_in_set = true;
                            ranges.extend(complement(group));
                        } else {
                            ranges.extend_from_slice(group);
                        }
                        continue;
                    }
                }
            }
            let lo = self.set_char()?;
            let mut hi = lo;
            if self.peek(0) == Some('-') && self.peek(1).is_some_and(|c| c != ']') {
                self.at += 1;
                hi = self.set_char()?;
                if hi < lo {
                    return Err("a reversed range".into());
                }
            }
            if lo > 0x7F || hi > 0x7F {
                self.saw_non_ascii = true;
            }
            ranges.push((lo, hi));
        }
        write_set(&mut self.out, negated, &ranges);
        Ok(())
    }

    fn set_char(&mut self) -> Result<u32, String> {
        let c = self.peek(0).ok_or("a missing ]")?;
        if c == '\\' {
            return self.escaped_rune();
        }
        self.at += 1;
        Ok(c as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::translate;

    fn is(pattern: &str, text: &str) -> bool {
        let t = translate(pattern).expect("translates");
        regex::Regex::new(&t).expect("compiles").is_match(text)
    }

    #[test]
    fn the_same_language() {
        assert!(is(r"\d+", "a1"));
        assert!(!is(r"\d", "١")); // ASCII digits only, as in RE2
        assert!(!is(r"\s", "\u{b}")); // RE2's \s has no \v
        assert!(is(r"a\<b", "a<b")); // a literal in RE2
        assert!(is(r"[a&&b]", "&"));
        assert!(is(r"x{,2}", "x{,2}"));
        assert!(is(r"(?i)k", "\u{212a}"));
        assert!(is(r"[[:alpha:]]+$", "abc"));
        assert!(is(r"[^\x00-\x{10FFFF}]|b", "b"));
        assert!(translate(r"\pL").is_err());
        assert!(translate(r"(?i)é").is_err());
        assert!(translate(r"a**").is_err());
    }
}
