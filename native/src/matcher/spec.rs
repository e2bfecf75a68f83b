//! What the matcher needs of one rule, as `offsetd.rules.program.match.match_part` writes it.

use serde::Deserialize;

use crate::event::Kind;
use crate::matcher::conditions::ConditionSpec;

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct MatchRule {
    /// `match.kind`.
    pub kinds: Vec<Kind>,
    /// `match.state` (None: any state, tombstones included).
    pub states: Option<Vec<String>>,
    /// `match`'s other conditions, in `Unless.conditions()` order (no `state`: `states`).
    pub conditions: Vec<ConditionSpec>,
    /// `match.unless`'s conditions (None: no `unless`).
    pub unless: Option<Vec<ConditionSpec>>,
}
