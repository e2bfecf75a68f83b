"""offsetd's compiled owner path (native/README.md): the Python engine is the reference."""

from collections.abc import Callable
from typing import Any

__version__: str

def event_roundtrip(text: str) -> str:
    """An event's `model_dump_json()` read into the compiled event and written back."""

def json_dumps(text: str) -> str:
    """A JSON text written again as `json.dumps` writes it (what the compiled audit records
    are made with)."""

class Framer:
    """The ingest's framing (`offsetd.ingest`, `offsetd.events.frames`), byte for byte."""

    def __init__(
        self,
        sources: dict[str, tuple[str, str, bool]],
        max_frame_bytes: int,
        max_record_bytes: int,
    ) -> None:
        """`sources`: topic -> (Connect cluster, route, dlq); route: "status", "dlq",
        "status_or_dlq" or "python" (the callback routes every record)."""

    def plan(
        self, batch: list[Any], route: Callable[[int], str | None]
    ) -> tuple[
        list[tuple[str, bytes, int]],
        list[tuple[int, int]],
        list[int],
        dict[tuple[str, int], int],
    ]:
        """A consumed batch's frames (owner, value, records), the records too large for any
        frame (index, framed size), the messages that carry an error (index), and each
        partition's next offset. `route(index)`: the Python router's owner for a record this
        cannot route, or None (it reported the record)."""

class State:
    """A connector's engine state (`offsetd.engine.state.ConnectorState`), held in Rust."""

    def __init__(self) -> None:
        """An empty state (`ConnectorState()`)."""

    @staticmethod
    def from_json(text: str) -> State:
        """The state of a `ConnectorState.model_dump_json()` text. Raises ValueError for a text
        that is not one, and for a state the compiled engine could not continue exactly (a time
        beyond ±2^62 ms, a window's record text Python did not write, a held decision without
        its rule and event time, a float pydantic writes otherwise): Python's to decide."""

    def to_json(self) -> str:
        """The state's JSON, byte for byte `ConnectorState.model_dump_json()`."""

    @property
    def deferred_count(self) -> int:
        """`len(ConnectorState.deferred)`: the events waiting for the connector's metadata."""

class Firing:
    """One firing of `Engine.decide`: a `Decision` or a light `Suppression`
    (`offsetd.engine.decision.Firing`)."""

    @property
    def id(self) -> str:
        """The decision id (`decision_id`: sha256 of rule, cluster, connector, key, trigger)."""

    @property
    def outcome(self) -> str:
        """`planned` or `suppressed`."""

    @property
    def is_decision(self) -> bool:
        """True for a full `Decision` (planned, or suppressed as `inhibited`); False for a
        `Suppression` (cooldown, budget, disabled)."""

    def to_json(self) -> str:
        """A Decision: its `model_dump_json()` text. A Suppression: a JSON object of its fields
        (`rule`, `mode`, `connect_cluster`, `connector`, `task_id`, `key`, `action_types`,
        `reason`, `detail`, `event_time_ms`, `decided_at_ms`, `trigger_source` (a source
        record's JSON), `record_text`, `from_failure`), plus `outcome` ("suppressed") and `id`."""

class Engine:
    """The compiled engine of a rule program (`offsetd.rules.program.rule_program`)."""

    def __init__(self, program_json: str, max_keys: int = 128) -> None:
        """Raises ValueError for a program it cannot decide exactly as Python does (durations
        from 2^53 ms, a parameter float pydantic writes otherwise, an unknown count key).
        `max_keys`: `offsetd.engine.decide.MAX_KEYS` (tests lower it)."""

    @property
    def names(self) -> list[str]:
        """The rules' names, in load order."""

    def decide(
        self,
        state: State,
        event_json: str,
        matched: list[str],
        meta_known: bool,
        now_ms: int,
        waiting: list[str] = ...,
    ) -> list[Firing]:
        """`decide_firings(state, event, rules, meta, now_ms)` for a status or DLQ event's
        `model_dump_json()` text: updates `state` in place, returns the firings. `matched`:
        the names `RuleSet.matched(event, meta)` returns; `waiting`: while the metadata is
        unknown (`meta_known` false), those `RuleSet.waiting_for_meta(event)` returns.
        Raises ValueError ("left to Python: ...") for an event it does not decide exactly
        (times beyond ±2^62 ms, a failing record whose text would not read back), before the
        state changes; for another kind, or an event that is not one."""

    def prune(self, state: State) -> None:
        """`offsetd.engine.decide.prune(state, rules)`: the sweep, now."""

    def fold(
        self, state: State, firings: list[Firing], window_ms: int
    ) -> tuple[list[str], list[str]]:
        """`fold_suppressed(state, firings, window_ms)`: the planned decisions' JSON
        (`model_dump_json()`), and the tallies it changed as their audit records' text
        (`json.dumps(tally_record(state, tally, window_ms))`), in order."""

# -- decoding (src/decode/): offsetd.events.frames.decode_frame, status.decode_status and
# dlq.decode_dlq. A topic is (Connect cluster, kind): kind "status" (decode_status), "dlq"
# (decode_dlq, no connector=), "offsets" (left to Python) or "shape" (the bench's copy topic:
# status and DLQ records told apart as bench.bench_daemon.is_status does). Records of topics not
# given are left to Python.

class Decoder:
    """A decoder with its memos (status keys and values, errors), for a stream of frames."""

    def __init__(self, topics: dict[str, tuple[str, str]]) -> None:
        """`topics`: topic -> (Connect cluster, kind); ValueError for an unknown kind."""

    def frame_events(self, frame: bytes) -> list[str | None]:
        """Per record of the frame, in order: its event's `model_dump_json()` text, or None
        when Python decodes it (it rejects it, or this side cannot be sure). ValueError when
        `decode_frame` raises Malformed for the frame."""

    def frame_event_count(self, frame: bytes) -> int:
        """How many records of the frame this side decodes into events (none written out as
        JSON): the decoding's own time, for the bench. ValueError for a broken frame."""

    def frame_outcomes(self, frame: bytes) -> list[tuple[str | None, str | None]]:
        """Per record: (its event's JSON, None), or (None, why Python decodes it: "malformed",
        "not decoded here", "big integer", "lone surrogate", "deep JSON", "long integer").
        ValueError for a broken frame."""

def decode_frame_events(frame: bytes, topics: dict[str, tuple[str, str]]) -> list[str | None]:
    """`Decoder(topics).frame_events(frame)`: per record its event's JSON or None (Python's)."""

def frame_fields(
    frame: bytes,
) -> list[
    tuple[str, int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]
]:
    """A frame's records as `RawRecord`'s fields (topic, partition, offset, timestamp_ms, key,
    value, headers), in order; ValueError whenever `decode_frame` raises Malformed."""

def frame_summary(frame: bytes) -> tuple[int, str | None]:
    """A frame's record count, and the topic of its first record whose key starts with
    `status-connector-` (None: none does); ValueError whenever `decode_frame` raises
    Malformed."""

def trace_first_line(head: str) -> tuple[str | None, str | None]:
    """`offsetd.events.decode.first_line(head)`: the outermost exception's class and message."""

def trace_last_cause(head: str) -> tuple[str, str | None] | None:
    """`offsetd.events.decode.last_cause(head)`: the last well-formed `Caused by:`'s class and
    message, or None."""

def char_class_ranges(name: str) -> list[tuple[int, int]]:
    """The inclusive code point ranges of Python's `\\w` ("word") or `\\s` ("space") as the
    decoder's tables hold them; ValueError for another name."""

class Matcher:
    """A rule set compiled for events (native/src/matcher): `RuleSet.matched`,
    `waiting_for_meta` and `meta_rules`, with Python's answers or none."""

    def __init__(self, program_json: str) -> None:
        """From `offsetd.rules.program.rule_program(rules)`; ValueError with the rule and the
        reason when a pattern cannot be matched exactly (a regex refused, ...)."""

    def matched(self, event_json: str, meta: tuple[str, str] | None) -> list[str] | None:
        """The names of the rules `event_json` matches, in load order, given the connector's
        (class, type); None when the answer is left to Python (undecided here)."""

    def waiting_for_meta(self, event_json: str) -> list[str] | None:
        """The names of the rules that need metadata and could match once it is known; None
        when left to Python."""

    @property
    def meta_rules(self) -> list[str]:
        """The names of the rules that need the connector's metadata, in load order."""

def classify(error_json: str | None) -> tuple[str, str] | None:
    """`offsetd.events.failures.classify` of an `ErrorInfo`'s JSON (None: no error): its
    (failure class, because), or None when Python's Unicode tables would decide."""

def failure_catalog() -> list[tuple[str, str]]:
    """The failure catalogue the classifier holds, in order: (class name or glob, failure)."""

def regex_matches(pattern: str, text: str, how: str) -> bool:
    """Whether the RE2 `pattern` matches `text` as the matcher runs it (`how`: "search" or
    "fullmatch"); ValueError with the reason when the pattern is refused."""

def glob_matches(pattern: str, name: str) -> bool:
    """`fnmatch.fnmatchcase(name, pattern)` as the matcher runs it; ValueError when Python
    could not compile the glob."""

class FrameOutcome:
    """What a frame decided by the compiled owner hands back (`Owner.decide_frame`)."""

    records: int
    """The frame's records."""
    applied: int
    """Events applied (0: the state did not change and need not be written)."""
    planned: list[str]
    """The planned decisions, in order: each `Decision.model_dump_json()`."""
    audit: list[tuple[str, str]]
    """Their audit records, in the same order: (decision id, text), each text
    `audit_json(d.audit_record(rules))` (the rule's spec spliced in when `rule_specs` has
    it)."""
    tallies: list[str]
    """The tallies the frame changed, in order: each `json.dumps(tally_record(...))`."""
    tally_audit: list[tuple[str, str]]
    """The same as (tally id, text): what the audit writes under each id."""
    decisions: list[tuple[str, str, str, str | None, int]]
    """(rule, mode, outcome, reason, count) of every firing ("planned" with no reason, or
    "suppressed" and its reason), in order of first firing."""
    matches: list[tuple[str, int]]
    """(rule, count): the rules that saw an event (`on_match`), in load order."""
    events: list[tuple[str, str, int]]
    """(kind, topic, count) of the events applied, in order of first event."""
    times: list[tuple[str, int]]
    """(kind, event time in ms) of every applied event that is not a DLQ record, in order."""
    failures: list[tuple[str, int, str | None]]
    """The suppressed firings (held `inhibited` decisions included) caused by failures, as the
    breaker reads them: (decision id, decided at, record text), in order, the first of each
    distinct (decided at, record text): the breaker's answer depends on those alone, and it
    trips on the first firing that trips it."""

class Owner:
    """The compiled owner of a rule set: decodes, matches and decides whole frames."""

    def __init__(
        self,
        program_json: str,
        topics: dict[str, tuple[str, str]],
        window_ms: int,
        max_keys: int = 128,
        rule_specs: dict[str, str] = ...,
    ) -> None:
        """`program_json`: `rule_program(rules)`; `topics`: topic -> (Connect cluster,
        "status" | "dlq" | "offsets" | "shape"); `rule_specs`: rule name ->
        `rule_spec(rule).text` (the planned decisions' audit records carry it). ValueError when
        the rule set is one the compiled parts cannot decide exactly."""

    def decide_frame(
        self,
        state: State,
        data: bytes,
        meta: tuple[str, str] | None,
        now_ms: int | None,
    ) -> FrameOutcome | None:
        """One frame on `state` (updated in place), with the connector's (class, type) if
        known, at `now_ms` (None: each event's own time). None: the frame is the Python
        engine's (a record, an answer or a time the compiled path leaves), nothing changed."""
