"""What a rule test run prints: expected and produced decisions, one line each."""

from __future__ import annotations

from offsetd.engine.decision import Decision
from offsetd.events.models import (
    RecordRef,
)
from offsetd.outcomes import suppressed_outcome
from offsetd.rules.models import format_duration
from offsetd.ruletest.spec import Expect, FileResult

__all__ = ["describe_decision", "describe_expect", "format_result", "restart_not_before"]


def restart_not_before(decision: Decision) -> int | None:
    for action in decision.actions:
        if action.effects.backoff:
            value = action.params.get("not_before_ms")
            return int(value) if value is not None else None
    return None


def _record_text(record: RecordRef | None) -> str:
    return "none" if record is None else f"{record.topic}-{record.partition}@{record.offset}"


def describe_decision(decision: Decision) -> str:
    """One line, in the vocabulary of `expect`."""
    parts = [
        f"at {format_duration(decision.event_time_ms)}",
        f"rule={decision.rule}",
        f"connector={decision.connector}",
        f"outcome={_outcome(decision.outcome, decision.reason)}",
    ]
    parts.append(f"actions=[{', '.join(decision.action_types)}]")
    if decision.task_id is not None:
        parts.append(f"task_id={decision.task_id}")
    if decision.record is not None or decision.record_status is not None:
        parts.append(f"record={_record_text(decision.record)}")
    if decision.record_status is not None:
        parts.append(f"record_status={decision.record_status}")
    not_before = restart_not_before(decision)
    if not_before is not None:
        parts.append(f"not_before={format_duration(not_before)}")
    return " ".join(parts)


def describe_expect(expect: Expect) -> str:
    given = expect.model_fields_set
    parts = [f"at {format_duration(expect.at)}", f"rule={expect.rule}"]
    if "connector" in given:
        parts.append(f"connector={expect.connector}")
    parts.append(
        f"outcome={_outcome(expect.outcome, expect.reason if 'reason' in given else None)}"
    )
    if "mode" in given:
        parts.append(f"mode={expect.mode}")
    if expect.actions is not None:
        parts.append(f"actions=[{', '.join(expect.actions)}]")
    if "task_id" in given:
        parts.append(f"task_id={expect.task_id}")
    if "record" in given:
        parts.append(f"record={_record_text(expect.record)}")
    if "record_status" in given:
        parts.append(f"record_status={expect.record_status}")
    if expect.not_before is not None:
        parts.append(f"not_before={format_duration(expect.not_before)}")
    return " ".join(parts)


def format_result(result: FileResult) -> list[str]:
    """promtool-style lines: the file, then OK/FAILED per test with a readable diff."""
    lines = [f"Unit Testing: {result.path}"]
    if result.problems:
        lines.append("  FAILED (the test file or its rules are invalid):")
        lines.extend(f"    {problem}" for problem in result.problems)
        return lines
    for case in result.cases:
        if case.ok:
            lines.append(f"  OK      {case.name}")
            continue
        lines.append(f"  FAILED  {case.name}")
        if case.missing:
            lines.append("    expected but not produced:")
            lines.extend(f"      - {text}" for text in case.missing)
        if case.unexpected:
            lines.append("    produced but not expected:")
            lines.extend(f"      + {text}" for text in case.unexpected)
        lines.append("    all decisions produced:")
        lines.extend(f"        {describe_decision(d)}" for d in case.decisions)
        if not case.decisions:
            lines.append("        (none)")
    return lines


def _outcome(outcome: str, reason: str | None) -> str:
    """`suppressed_cooldown`: the word the audit, the metrics and `offsetd history` use."""
    return suppressed_outcome(reason) if outcome == "suppressed" and reason else outcome
