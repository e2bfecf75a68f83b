//! The rule set as data (`offsetd.rules.program.rule_program`): what the compiled parts are
//! built from.

use serde::Deserialize;

use crate::engine::{EngineRule, EngineSet};
use crate::matcher::MatchRule;

#[derive(Deserialize, Debug, Clone)]
pub struct RuleProgram {
    pub name: String,
    pub matcher: MatchRule,
    pub engine: EngineRule,
}

#[derive(Deserialize, Debug, Clone)]
pub struct Program {
    pub rules: Vec<RuleProgram>,
    pub engine: EngineSet,
}

impl Program {
    pub fn from_json(text: &str) -> Result<Program, String> {
        serde_json::from_str(text).map_err(|e| format!("not a rule program: {e}"))
    }
}
