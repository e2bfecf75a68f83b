"""Rules: what SREs write in YAML (models), how it is loaded and matched (pure; no I/O imports)."""

from offsetd.rules.loading import RulesError, load_rule_files, load_rules
from offsetd.rules.matching import CompiledRule, RuleSet, explain
from offsetd.rules.models import ConnectorMeta, Rule
from offsetd.rules.schema import rules_file_schema

__all__ = [
    "CompiledRule",
    "ConnectorMeta",
    "Rule",
    "RuleSet",
    "RulesError",
    "explain",
    "load_rule_files",
    "load_rules",
    "rules_file_schema",
]
