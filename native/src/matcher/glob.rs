//! Shell globs as `fnmatch.fnmatchcase` reads them (Python 3.11's `fnmatch.translate`, then
//! `re`): `*` any run of characters (newlines too), `?` any one character, `[...]` a set,
//! anything else itself, and the whole name must match.
//!
//! The sets are where the subtlety is: `translate` splits a set at its hyphens into chunks,
//! drops ranges whose ends are reversed, escapes what `re` would read as set operations and
//! hands the result to `re`'s parser. This module replays those steps on characters, then reads
//! the set as `re`'s parser does, so a set means here exactly what it means there. Where Python
//! would fail (an `IndexError` in `translate`, a `re.error` from a set `translate` mangled), the
//! glob is refused: the rule set would not have loaded in Python.

/// One piece of a glob; every piece but `Star` stands for exactly one character.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyChar,
    Star,
    /// A set: characters or inclusive ranges, possibly negated.
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// `translate`'s `(?!)`: a set left empty once its reversed ranges are dropped.
    Never,
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Literal(l) => *l == c,
            Token::AnyChar => true,
            Token::Set { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
            Token::Never | Token::Star => false,
        }
    }
}

/// A compiled glob (`fnmatch.fnmatchcase(name, pattern)`).
#[derive(Debug, Clone)]
pub struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    pub fn new(pattern: &str) -> Result<Glob, String> {
        let pat: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::new();
        let n = pat.len();
        let mut i = 0;
        while i < n {
            let c = pat[i];
            i += 1;
            match c {
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                }
                '?' => tokens.push(Token::AnyChar),
                '[' => {
                    let mut j = i;
                    if j < n && pat[j] == '!' {
                        j += 1;
                    }
                    if j < n && pat[j] == ']' {
                        j += 1;
                    }
                    while j < n && pat[j] != ']' {
                        j += 1;
                    }
                    if j >= n {
                        tokens.push(Token::Literal('['));
                    } else {
                        tokens.push(set_token(&pat, i, j).map_err(|why| {
                            format!("glob {pattern:?}: Python could not compile it ({why})")
                        })?);
                        i = j + 1;
                    }
                }
                other => tokens.push(Token::Literal(other)),
            }
        }
        Ok(Glob { tokens })
    }

    /// Whether the whole of `name` matches. Every token but `*` takes one character, so the
    /// leftmost fit of each piece after a star is always a right one (what `translate`'s atomic
    /// groups do): one backtrack point, linear in practice.
    pub fn matches(&self, name: &str) -> bool {
        let tokens = &self.tokens;
        let (mut t, mut s) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        loop {
            if let Some(c) = name[s..].chars().next() {
                match tokens.get(t) {
                    Some(Token::Star) => {
                        star = Some((t, s));
                        t += 1;
                        continue;
                    }
                    Some(token) if token.matches(c) => {
                        t += 1;
                        s += c.len_utf8();
                        continue;
                    }
                    _ => {}
                }
                match star {
                    Some((star_at, from)) => {
                        let skipped = name[from..].chars().next().map_or(1, char::len_utf8);
                        let resume = from + skipped;
                        star = Some((star_at, resume));
                        t = star_at + 1;
                        s = resume;
                    }
                    None => return false,
                }
            } else {
                return tokens[t..].iter().all(|token| *token == Token::Star);
            }
        }
    }
}

/// A character of the set text `translate` writes, as `re` will read it: `raw` characters are
/// unescaped (a raw `-` joins a range; a raw `]` would end the set).
#[derive(Debug, Clone, Copy)]
struct SetChar {
    c: char,
    raw: bool,
}

/// `translate`'s set branch for `pat[i..j]` (the text between `[` and `]`), then `re`'s set
/// parser on what it writes.
fn set_token(pat: &[char], i: usize, j: usize) -> Result<Token, String> {
    let stuff: Vec<char> = pat[i..j].to_vec();
    // The chunks, each a list of characters written escaped where `translate` escapes them.
    let mut written: Vec<SetChar> = Vec::new();
    if !stuff.contains(&'-') {
        written.extend(stuff.iter().map(|&c| SetChar {
            c,
            raw: !matches!(c, '\\' | '&' | '~' | '|'),
        }));
    } else {
        let mut chunks: Vec<Vec<char>> = Vec::new();
        let mut start = i;
        let mut k = if pat[i] == '!' { i + 2 } else { i + 1 };
        loop {
            let found = (k..j).find(|&at| pat[at] == '-');
            let Some(at) = found else { break };
            chunks.push(pat[start..at].to_vec());
            start = at + 1;
            k = at + 3;
        }
        let chunk: Vec<char> = pat[start.min(j)..j].to_vec();
        if !chunk.is_empty() {
            chunks.push(chunk);
        } else {
            match chunks.last_mut() {
                Some(last) => last.push('-'),
                None => return Err("a set of one hyphen chunk".to_string()),
            }
        }
        // Remove empty ranges (reversed ends), from the last pair back, as translate does;
        // an emptied chunk makes translate index an empty string (IndexError).
        let mut k = chunks.len().saturating_sub(1);
        while k >= 1 {
            let (before, after) = (&chunks[k - 1], &chunks[k]);
            let (Some(&last), Some(&first)) = (before.last(), after.first()) else {
                return Err("translate: an empty chunk (IndexError)".to_string());
            };
            if last > first {
                let mut merged = before[..before.len() - 1].to_vec();
                merged.extend_from_slice(&after[1..]);
                chunks[k - 1] = merged;
                chunks.remove(k);
            }
            k -= 1;
        }
        for (at, chunk) in chunks.iter().enumerate() {
            if at > 0 {
                written.push(SetChar { c: '-', raw: true });
            }
            written.extend(chunk.iter().map(|&c| SetChar {
                c,
                raw: !matches!(c, '\\' | '-' | '&' | '~' | '|'),
            }));
        }
    }
    if written.is_empty() {
        return Ok(Token::Never);
    }
    if written.len() == 1 && written[0].c == '!' {
        return Ok(Token::AnyChar);
    }
    let negated = written[0].c == '!';
    if negated {
        written.remove(0);
    } else if matches!(written[0].c, '^' | '[') {
        written[0].raw = false;
    }
    read_set(&written).map(|ranges| Token::Set { negated, ranges })
}

/// `re`'s parser on `[` + the written set + `]` (`re._parser`, the set branch).
fn read_set(items: &[SetChar]) -> Result<Vec<(char, char)>, String> {
    let mut ranges: Vec<(char, char)> = Vec::new();
    let mut at = 0;
    while at < items.len() {
        let this = items[at];
        at += 1;
        if this.raw && this.c == ']' && !ranges.is_empty() {
            return Err("a `]` that ends the set early".to_string());
        }
        let joins = items.get(at).is_some_and(|next| next.raw && next.c == '-');
        if !joins {
            ranges.push((this.c, this.c));
            continue;
        }
        at += 1; // the '-'
        let Some(that) = items.get(at).copied() else {
            // `[a-]`: the '-' before the closing bracket is itself
            ranges.push((this.c, this.c));
            ranges.push(('-', '-'));
            break;
        };
        at += 1;
        if that.raw && that.c == ']' {
            return Err("a `]` that ends the set early".to_string());
        }
        if that.c < this.c {
            return Err(format!("bad character range {}-{}", this.c, that.c));
        }
        ranges.push((this.c, that.c));
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::Glob;

    fn m(p: &str, s: &str) -> bool {
        Glob::new(p).expect("compiles").matches(s)
    }

    #[test]
    fn globs_as_fnmatchcase() {
        assert!(m("orders-*", "orders-sink"));
        assert!(!m("orders-*", "Orders-sink"));
        assert!(m("*a*b", "xxaxxb"));
        assert!(m("a?c", "a\nc"));
        assert!(m("[!a]", "b"));
        assert!(!m("[!a]", "a"));
        assert!(m("[a-c]x", "bx"));
        assert!(m("[z-a]", "z") == false);
        assert!(m("[a-]", "-"));
        assert!(m("[", "["));
        assert!(m("**", ""));
    }
}
