//! `offsetd.rules.patterns.NameMatcher`: a name condition's patterns (connector, cluster,
//! classes, origin topic). Literal names are compared, globs are `fnmatchcase` (`glob.rs`),
//! `{regex}` patterns are RE2 full matches (`re2.rs`), all of one condition in one alternation.

use serde::Deserialize;

use crate::matcher::glob::Glob;
use crate::matcher::re2;

/// One pattern as `match_part` writes it: `{"glob": "orders-*"}` or `{"regex": "..."}`.
#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "snake_case")]
pub enum PatternSpec {
    Glob(String),
    Regex(String),
}

/// Characters that make a pattern a glob (`_GLOB_CHARS`); without them it is a literal name.
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

#[derive(Debug, Clone)]
pub struct NameSet {
    literals: Vec<String>,
    globs: Vec<Glob>,
    regex: Option<regex::Regex>,
}

impl NameSet {
    pub fn new(patterns: &[PatternSpec]) -> Result<NameSet, String> {
        let mut literals = Vec::new();
        let mut globs = Vec::new();
        let mut regexes = Vec::new();
        for pattern in patterns {
            match pattern {
                PatternSpec::Glob(p) if !p.contains(GLOB_CHARS) => literals.push(p.clone()),
                PatternSpec::Glob(p) => globs.push(Glob::new(p)?),
                PatternSpec::Regex(p) => regexes.push(re2::translate(p)?),
            }
        }
        let regex = if regexes.is_empty() {
            None
        } else {
            Some(full_match(&regexes)?)
        };
        Ok(NameSet {
            literals,
            globs,
            regex,
        })
    }

    /// `NameMatcher(value)`: the literal set, then the globs, then the regexes.
    pub fn matches(&self, value: &str) -> bool {
        self.literals.iter().any(|l| l == value)
            || self.globs.iter().any(|g| g.matches(value))
            || self.regex.as_ref().is_some_and(|r| r.is_match(value))
    }
}

/// `any_regex(patterns, "fullmatch")`: the joined alternation anchored at both ends (each
/// pattern scoped in its own group, as `_scoped` does, so its flags stay its own).
fn full_match(translated: &[String]) -> Result<regex::Regex, String> {
    let joined = translated
        .iter()
        .map(|t| format!("(?:{t})"))
        .collect::<Vec<_>>()
        .join("|");
    regex::Regex::new(&format!(r"\A(?:{joined})\z"))
        .map_err(|e| format!("the regex crate refuses the translated names: {e}"))
}

/// `any_regex(patterns, "search")`'s joined alternation, unanchored.
pub fn search_regex(patterns: &[String]) -> Result<regex::Regex, String> {
    let translated = patterns
        .iter()
        .map(|p| re2::translate(p).map(|t| format!("(?:{t})")))
        .collect::<Result<Vec<_>, _>>()?;
    regex::Regex::new(&translated.join("|"))
        .map_err(|e| format!("the regex crate refuses the translated messages: {e}"))
}
