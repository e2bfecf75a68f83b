//! `offsetd.events.decode.json_value`'s strict JSON, read for a few top-level fields.
//!
//! Python's `json` (its C scanner, `parse_constant` refusing NaN and Infinity) accepts
//! exactly RFC 8259 JSON with `[ \t\n\r]` as whitespace around it: no trailing commas, no
//! control characters in strings, `\uXXXX` escapes in either case, and lone surrogates
//! (`"\ud800"`) kept as they are. Duplicate keys: the last wins. Integers of any size (up to
//! `sys.int_info`'s digit limit); floats of any exponent (`1e999` is `inf`).
//!
//! The decoders need a handful of top-level fields, so this scanner checks the whole text but
//! keeps only the members it is asked for (`object_fields`): strings elsewhere are checked,
//! not copied. Where Python's answer depends on more than the text (nesting deep enough to
//! hit the interpreter's recursion limit, integers near its digit limit), the scanner
//! refuses with a reason of its own rather than guess.

use std::borrow::Cow;

/// Why a text was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not JSON as Python reads it: Python raises too (Malformed).
    Malformed,
    /// Nested deeper than `MAX_DEPTH`: Python's answer depends on its stack.
    Deep,
    /// An integer of more than `MAX_INT_DIGITS` digits: Python's depends on its digit limit.
    LongInteger,
}

/// Nesting this scanner reads; Python reads ~1000 deep (its recursion limit) but how deep
/// exactly depends on the caller's stack. Connect's values nest two levels.
const MAX_DEPTH: usize = 64;
/// Integer digits read for sure: `sys.set_int_max_str_digits` cannot go below 640.
const MAX_INT_DIGITS: usize = 640;

/// A JSON string's value, as Python holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Text<'a> {
    Valid(Cow<'a, str>),
    /// It holds a lone surrogate (`"\ud800"`): a Python str no Rust `String` can be.
    LoneSurrogate,
}

/// A kept member's value: what the decoders ask of it (`type(v) is int`, `isinstance(v, str)`).
#[derive(Debug, Clone, PartialEq)]
pub enum Item<'a> {
    Null,
    Bool,
    Int(i64),
    /// An integer beyond i64 (a Python int all the same), and its sign.
    BigInt {
        negative: bool,
    },
    Float,
    Str(Text<'a>),
    Array,
    /// An object: its text, to be read again (`object_fields`).
    Object(&'a str),
}

/// The members `names` of the top-level object of `text` (None each when absent; the last of
/// duplicates), or `Ok(None)` when the text is JSON but not an object.
pub fn object_fields<'a, const N: usize>(
    text: &'a str,
    names: [&str; N],
) -> Result<Option<[Option<Item<'a>>; N]>, Refusal> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        at: 0,
    };
    scanner.skip_space();
    let found = if scanner.peek() == Some(b'{') {
        let mut kept: [Option<Item<'a>>; N] = std::array::from_fn(|_| None);
        scanner.object(1, Some((&names, &mut kept)))?;
        Some(kept)
    } else {
        scanner.value(1, false)?;
        None
    };
    scanner.skip_space();
    if scanner.at != scanner.bytes.len() {
        return Err(Refusal::Malformed); // "Extra data"
    }
    Ok(found)
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

type Wanted<'n, 'k, 'a, const N: usize> = (&'n [&'n str; N], &'k mut [Option<Item<'a>>; N]);

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Refusal> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(Refusal::Malformed)
        }
    }

    /// One value at `depth`; `keep`: return what it is (else only check it).
    fn value(&mut self, depth: usize, keep: bool) -> Result<Item<'a>, Refusal> {
        if depth > MAX_DEPTH {
            return Err(Refusal::Deep);
        }
        match self.peek() {
            Some(b'{') => {
                let start = self.at;
                self.object::<0>(depth, None)?;
                Ok(Item::Object(&self.text[start..self.at]))
            }
            Some(b'[') => {
                self.array(depth)?;
                Ok(Item::Array)
            }
            Some(b'"') => Ok(Item::Str(self.string(keep)?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b'n') => self.literal("null", Item::Null),
            Some(b't') => self.literal("true", Item::Bool),
            Some(b'f') => self.literal("false", Item::Bool),
            _ => Err(Refusal::Malformed), // NaN and Infinity too: `parse_constant` refuses
        }
    }

    fn literal(&mut self, word: &str, item: Item<'a>) -> Result<Item<'a>, Refusal> {
        if self.bytes[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(item)
        } else {
            Err(Refusal::Malformed)
        }
    }

    /// An object; with `wanted`, its members of those names are kept (the last one wins).
    fn object<const N: usize>(
        &mut self,
        depth: usize,
        mut wanted: Option<Wanted<'_, '_, 'a, N>>,
    ) -> Result<(), Refusal> {
        self.expect(b'{')?;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(());
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(Refusal::Malformed);
            }
            let slot = match &wanted {
                Some((names, _)) => match self.string(true)? {
                    Text::Valid(key) => names.iter().position(|n| *n == key),
                    Text::LoneSurrogate => None,
                },
                None => {
                    self.string(false)?;
                    None
                }
            };
            self.skip_space();
            self.expect(b':')?;
            self.skip_space();
            let item = self.value(depth + 1, slot.is_some())?;
            if let (Some(index), Some((_, kept))) = (slot, wanted.as_mut()) {
                kept[index] = Some(item);
            }
            self.skip_space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_space();
                }
                Some(b'}') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Refusal::Malformed),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Refusal> {
        self.expect(b'[')?;
        self.skip_space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(());
        }
        loop {
            self.value(depth + 1, false)?;
            self.skip_space();
            match self.peek() {
                Some(b',') => {
                    self.at += 1;
                    self.skip_space();
                }
                Some(b']') => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(Refusal::Malformed),
            }
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        self.at - start
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`; anything else where a number
    /// starts is an error in Python too (a number ends where its grammar does, and what
    /// follows is then out of place).
    fn number(&mut self) -> Result<Item<'a>, Refusal> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let int_digits = match self.peek() {
            Some(b'0') => {
                self.at += 1;
                1
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(Refusal::Malformed),
        };
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(Refusal::Malformed);
            }
            float = true;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(Refusal::Malformed);
            }
            float = true;
        }
        if float {
            return Ok(Item::Float);
        }
        if int_digits > MAX_INT_DIGITS {
            return Err(Refusal::LongInteger);
        }
        Ok(match self.text[start..self.at].parse::<i64>() {
            Ok(value) => Item::Int(value),
            Err(_) => Item::BigInt {
                negative: self.bytes[start] == b'-',
            },
        })
    }

    /// Past the string's characters that need no attention (not `"`, `\\` or a control).
    /// `memchr2` finds the run's end and a plain scan (which the compiler vectorizes) its
    /// first control character: traces are kilobytes of such runs.
    fn skip_plain(&mut self) {
        let rest = &self.bytes[self.at..];
        let run = memchr::memchr2(b'"', b'\\', rest).unwrap_or(rest.len());
        let plain = &rest[..run];
        let run = if plain.iter().fold(false, |seen, &b| seen | (b < 0x20)) {
            plain.iter().position(|&b| b < 0x20).unwrap_or(run)
        } else {
            run
        };
        self.at += run;
    }

    fn hex4(&mut self) -> Result<u32, Refusal> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or(Refusal::Malformed)?;
        let mut value = 0u32;
        for &d in digits {
            let nibble = (d as char).to_digit(16).ok_or(Refusal::Malformed)?;
            value = value * 16 + nibble;
        }
        self.at += 4;
        Ok(value)
    }

    /// A string (at its opening quote). `keep`: its value (borrowed when it has no escapes);
    /// else it is only checked and an empty value is returned.
    fn string(&mut self, keep: bool) -> Result<Text<'a>, Refusal> {
        self.expect(b'"')?;
        let start = self.at;
        // The plain run: no escapes, the common case.
        self.skip_plain();
        match self.peek() {
            Some(b'"') => {
                let text = &self.text[start..self.at];
                self.at += 1;
                return Ok(Text::Valid(Cow::Borrowed(if keep { text } else { "" })));
            }
            Some(b'\\') => {}
            _ => return Err(Refusal::Malformed), // the end, or a control character (strict)
        }
        let mut out = String::new();
        if keep {
            out.push_str(&self.text[start..self.at]);
        }
        let mut lone = false;
        loop {
            match self.peek() {
                None | Some(0..=0x1f) => return Err(Refusal::Malformed),
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => {
                    self.at += 1;
                    let escaped = self.peek().ok_or(Refusal::Malformed)?;
                    self.at += 1;
                    let c = match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\x08',
                        b'f' => '\x0c',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => match self.unicode_escape()? {
                            Some(c) => c,
                            None => {
                                lone = true;
                                continue;
                            }
                        },
                        _ => return Err(Refusal::Malformed),
                    };
                    if keep {
                        out.push(c);
                    }
                }
                Some(_) => {
                    let run = self.at;
                    self.skip_plain();
                    if keep {
                        out.push_str(&self.text[run..self.at]);
                    }
                }
            }
        }
        Ok(if lone {
            Text::LoneSurrogate
        } else {
            Text::Valid(Cow::Owned(out))
        })
    }

    /// The code point of `\uXXXX` (after its `\u`), joined with a following `\uXXXX` low
    /// surrogate as Python joins them; None for a surrogate left alone.
    fn unicode_escape(&mut self) -> Result<Option<char>, Refusal> {
        let first = self.hex4()?;
        if (0xd800..0xdc00).contains(&first) && self.bytes[self.at..].starts_with(b"\\u") {
            let save = self.at;
            self.at += 2;
            let second = self.hex4()?; // bad hex here is an error in Python too
            if (0xdc00..0xe000).contains(&second) {
                let joined = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                return Ok(char::from_u32(joined));
            }
            self.at = save; // the next escape stands alone
        }
        Ok(char::from_u32(first)) // None for a surrogate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Result<Option<[Option<Item<'_>>; 2]>, Refusal> {
        object_fields(text, ["a", "b"])
    }

    #[test]
    fn reads_as_python_json_does() {
        let got = fields(" {\"a\":1,\"b\":\"x\\u00e9\",\"a\":[1e999, {}]}\r\n").unwrap();
        assert_eq!(
            got,
            Some([Some(Item::Array), Some(Item::Str(Text::Valid("xé".into())))])
        );
        assert_eq!(fields("\"s\"").unwrap(), None);
        assert_eq!(
            fields("{\"a\":\"\\ud800\"}").unwrap().unwrap()[0],
            Some(Item::Str(Text::LoneSurrogate))
        );
        let pair = fields("{\"a\":\"\\ud83d\\ude00\"}").unwrap().unwrap();
        assert_eq!(pair[0], Some(Item::Str(Text::Valid("😀".into()))));
        assert_eq!(
            fields("{\"a\":99999999999999999999}").unwrap().unwrap()[0],
            Some(Item::BigInt { negative: false })
        );
        for bad in [
            "{\"a\":1,}",
            "NaN",
            "[-Infinity]",
            "{\"a\":01}",
            "1.",
            "\"\t\"",
            "{} x",
            "\u{feff}{}",
        ] {
            assert_eq!(fields(bad), Err(Refusal::Malformed), "{bad}");
        }
        assert_eq!(fields(&"[".repeat(100)), Err(Refusal::Deep));
    }
}
