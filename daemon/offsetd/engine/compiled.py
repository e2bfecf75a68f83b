"""The owner's frames decided by the compiled path (native/), where it can decide them exactly.

`CompiledOwner` wraps `offsetd_native.Owner`: one frame of a connector's raw records in, its
planned decisions, its tallies' audit records and the counts the metrics need out. A frame is
decided wholly by the compiled path or, when any of its records is outside what that path
reproduces exactly (a record the decoders leave to Python, an answer the matcher leaves, a
time the engine refuses), wholly by the Python engine (`decide_frame` returns None and changes
nothing): the Python engine is the reference, the compiled one is held equal to it by
tests/unit/native. Both write the same state JSON, so one connector's frames may switch between
them (`StateCache` holds either state).

`CompiledOwner.create` is None when the compiled path is not installed (an install without
Rust: the demo's, the image's) or cannot decide this rule set exactly (a regex it reads
otherwise than RE2, a duration past its range): the daemon then runs the Python engine, and says
why once. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from offsetd.engine.decision import Decision, rule_spec
from offsetd.rules.models import ConnectorMeta
from offsetd.rules.program import rule_program
from offsetd.rules.ruleset import RuleSet

if TYPE_CHECKING:
    from offsetd_native import FrameOutcome, State

try:
    import offsetd_native as _native
except ImportError:  # an install without Rust
    _native = None  # type: ignore[assignment]

__all__ = ["CompiledOwner", "compiled_state", "frame_summary", "installed"]


def installed() -> bool:
    """Whether the compiled path (offsetd-native) is installed here."""
    return _native is not None


def compiled_state(text: str | None) -> State | None:
    """The compiled state of a stored `ConnectorState` JSON text (an empty state for none);
    None when the compiled engine cannot continue it exactly (the Python engine decides)."""
    assert _native is not None
    if not text:
        return _native.State()
    try:
        return _native.State.from_json(text)
    except ValueError:
        return None


def frame_summary(frame: bytes) -> tuple[int, str | None] | None:
    """What the owner needs of a frame before it decides, without the records in Python
    (`decode_frame` costs ~6 us a record): its record count and the topic of its first record
    keyed `status-connector-` (None: none is). None when `decode_frame` would raise Malformed."""
    assert _native is not None
    try:
        return _native.frame_summary(frame)
    except ValueError:
        return None


class CompiledOwner:
    """The compiled owner of one rule set: decides frames on compiled states."""

    def __init__(
        self, rules: RuleSet, topics: Mapping[str, tuple[str, str]], window_ms: int
    ) -> None:
        """`topics`: topic -> (Connect cluster, "status" | "dlq" | "offsets" | "shape"), the
        decoder that reads it. ValueError when the rule set is one it cannot decide exactly."""
        assert _native is not None
        self.rules = rules
        specs = {rule.name: rule_spec(rule).text for rule in rules}
        self._owner = _native.Owner(rule_program(rules), dict(topics), window_ms, rule_specs=specs)

    @classmethod
    def create(
        cls, rules: RuleSet, topics: Mapping[str, tuple[str, str]], window_ms: int
    ) -> tuple[CompiledOwner | None, str]:
        """The compiled owner, or None and why not (not installed, the rule set refused)."""
        if _native is None:
            return None, "the compiled path (offsetd-native) is not installed"
        try:
            return cls(rules, topics, window_ms), ""
        except ValueError as refused:
            return None, f"the compiled path cannot decide these rules exactly: {refused}"

    def decide_frame(
        self, state: State, frame: bytes, meta: ConnectorMeta | None, now_ms: int | None
    ) -> FrameOutcome | None:
        """One frame of a connector's records on its compiled `state` (updated in place), at
        `now_ms` (None: each event's own time). None: the frame is the Python engine's, and
        nothing was changed."""
        known = None if meta is None else (meta.connector_class, meta.connector_type)
        return self._owner.decide_frame(state, frame, known, now_ms)

    @staticmethod
    def planned(outcome: FrameOutcome) -> list[Decision]:
        """The frame's planned decisions, as the Python engine makes them."""
        return [Decision.model_validate_json(text) for text in outcome.planned]

    @staticmethod
    def tallies(outcome: FrameOutcome) -> list[dict[str, Any]]:
        """The frame's tally audit records (`tally_record`), as the Python engine makes them."""
        return [json.loads(text) for text in outcome.tallies]

    @staticmethod
    def audit_records(outcome: FrameOutcome) -> list[tuple[str, bytes]]:
        """The planned decisions' audit records as the audit writes them: (id, bytes)
        (`AuditLog.write_many_encoded`)."""
        return [(decision_id, text.encode()) for decision_id, text in outcome.audit]

    @staticmethod
    def tally_records(outcome: FrameOutcome) -> list[tuple[str, bytes]]:
        """The tallies' audit records as the audit writes them: (id, bytes)."""
        return [(tally_id, text.encode()) for tally_id, text in outcome.tally_audit]
