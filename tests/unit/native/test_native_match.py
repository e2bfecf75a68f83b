"""The compiled matcher answers what `RuleSet.matched` and `waiting_for_meta` answer.

Held equal, rule names in load order, for every (event, metadata): the live tests' rules and
streams (`tests/unit/rules/test_rules_live.py`), the fast path's rule set with the example rules
and its streams (`tests/unit/engine/test_engine_fastpath.py`), the examples on events the
decoders make of random and recorded records, and random rule sets (globs with `*?[]!-`,
`{regex}` names, RE2 message regexes with flags and classes, plain and `(?i)` texts, classes,
stages, failures, task ids, origin topics, metadata, `unless`) on random events. Where the
compiled side says "left to Python" (None), the tests check it is for the documented reason.

The parts are held equal on their own too: globs to `fnmatch.fnmatchcase` (a glob it refuses,
Python cannot compile either), RE2 patterns to google-re2 (`search` and `fullmatch`), the
failure classifier to `classify` on random and recorded traces, its catalogue to `CATALOG`.

Python's `classify` memo is keyed without the root cause class when the trace head is set (the
decoders derive that class from the head, so it never differs for them); hand-made errors can
differ there, so the Python side is asked with that memo empty (`python_matched`).
"""

from __future__ import annotations

import fnmatch
import json
import random
import re
from pathlib import Path
from typing import Any

import offsetd_native
import pytest
import re2  # type: ignore[import-untyped]  # no type information shipped
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from offsetd.events import failures
from offsetd.events.decode import Malformed, parse_trace
from offsetd.events.dlq import decode_dlq
from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    EventKind,
    RecordRef,
    SourceRecord,
    TaskStatusEvent,
    TopicStatusEvent,
)
from offsetd.events.status import decode_status
from offsetd.rules import ConnectorMeta, Rule, RuleSet
from offsetd.rules.loading import load_rules
from offsetd.rules.match import CONDITION_KINDS
from offsetd.rules.program import rule_program
from offsetd.saferegex import RegexRefused, check_regex
from tests.unit.engine import test_engine_fastpath as fastpath
from tests.unit.events.test_events_construct import dlq_records, status_records
from tests.unit.events.test_events_decode import FIXTURES, fixture
from tests.unit.rules import test_rules_live as live

EXAMPLES = Path(__file__).resolve().parents[3] / "rules" / "examples"
TRACE_FILES = sorted((Path(__file__).resolve().parents[2] / "fixtures" / "traces").glob("*.txt"))
COMPILED_KINDS = {
    EventKind.CONNECTOR_STATUS,
    EventKind.TASK_STATUS,
    EventKind.TOPIC_STATUS,
    EventKind.DLQ_RECORD,
}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def meta_pair(meta: ConnectorMeta | None) -> tuple[str, str] | None:
    return None if meta is None else (meta.connector_class, meta.connector_type)


def python_matched(rules: RuleSet, event: Any, meta: ConnectorMeta | None) -> list[str]:
    failures._MEMO.clear()  # the memo's key holds no root cause class (see the docstring)
    return [r.name for r in rules.matched(event, meta)]


def python_waiting(rules: RuleSet, event: Any) -> list[str]:
    failures._MEMO.clear()
    return [r.name for r in rules.waiting_for_meta(event)]


def undecided_because_unicode(error: ErrorInfo | None) -> bool:
    """The one reason the matcher leaves an event to Python: a class line of its error's trace
    runs into a non-ASCII character (Python's Unicode `\\w` decides whether the name goes on)."""
    if error is None:
        return False
    for line in error.trace_head.split("\n"):
        body = line.removeprefix("Caused by: ")
        run = re.match(r"[A-Za-z_$][A-Za-z0-9_$.]*", body)
        if run and run.end() < len(body) and not body[run.end()].isascii():
            return True
    return False


class Both:
    """A rule set on both sides; `check` asks both about an event and compares."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self.native = offsetd_native.Matcher(rule_program(rules))
        assert self.native.meta_rules == [r.name for r in rules.meta_rules]
        self.asked = 0
        self.left = 0

    def check(self, event: Any, meta: ConnectorMeta | None) -> None:
        if event.kind not in COMPILED_KINDS:
            return  # progress and source offsets stay Python's
        text = event.model_dump_json()
        self.asked += 1
        got = self.native.matched(text, meta_pair(meta))
        if got is None:
            self.left += 1
            assert undecided_because_unicode(getattr(event, "error", None)), event
        else:
            assert got == python_matched(self.rules, event, meta), (event, meta)
        if meta is None:
            waiting = self.native.waiting_for_meta(text)
            if waiting is None:
                assert undecided_because_unicode(getattr(event, "error", None)), event
            else:
                assert waiting == python_waiting(self.rules, event), event


# -- the live tests' and the fast path's rules and streams ---------------------------------------


@SETTINGS
@given(seed=st.integers(0, 100_000), count=st.integers(1, 300))
def test_the_live_rules_on_their_streams(seed: int, count: int) -> None:
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    both = Both(live.rules())
    pool = live.errors(rng)
    for offset in range(count):
        both.check(live.event(rng, pool, offset), rng.choice(live.METAS))
    assert both.left == 0  # these traces are ASCII


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), count=st.integers(30, 300))
def test_the_fast_path_rules_and_examples_on_its_streams(seed: int, count: int) -> None:
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    both = Both(fastpath.ruleset())
    for event, meta, _now in fastpath.stream(rng, count):
        both.check(event, meta)
    assert both.asked > 0


# -- the examples on decoded events --------------------------------------------------------------

EXAMPLE_RULES = load_rules(EXAMPLES)
EXAMPLE_METAS = (*live.METAS, ConnectorMeta("x.FileStreamSinkConnector", "sink"))


@SETTINGS
@given(raw=status_records(), meta=st.sampled_from(EXAMPLE_METAS))
def test_the_examples_on_decoded_status_records(raw: Any, meta: ConnectorMeta | None) -> None:
    try:
        event = decode_status("c", raw)
    except Malformed:
        return
    generation: int | None = getattr(event, "generation", None)
    if generation is not None and not -(2**63) <= generation < 2**63:
        # a Java int in Connect, any integer in Python: the compiled event refuses it (the
        # owner leaves such a record to Python before it is matched)
        with pytest.raises(ValueError, match="expected i64"):
            Both(EXAMPLE_RULES).check(event, meta)
        return
    Both(EXAMPLE_RULES).check(event, meta)


@SETTINGS
@given(raw=dlq_records(), meta=st.sampled_from(EXAMPLE_METAS))
def test_the_examples_on_decoded_dlq_records(raw: Any, meta: ConnectorMeta | None) -> None:
    try:
        event = decode_dlq("c", raw, connector="owner")
    except Malformed:
        return
    Both(EXAMPLE_RULES).check(event, meta)


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in FIXTURES.glob("*.json") if p.stem.startswith(("status", "dlq")))
)
def test_the_examples_and_live_rules_on_recorded_events(name: str) -> None:
    raw = fixture(name)
    event = (
        decode_dlq("local", raw, connector="owner")
        if name.startswith("dlq")
        else decode_status("local", raw)
    )
    for rules in (EXAMPLE_RULES, live.rules(), fastpath.ruleset()):
        both = Both(rules)
        for meta in EXAMPLE_METAS:
            both.check(event, meta)
        assert both.left == 0


# -- random rule sets on random events -----------------------------------------------------------

NAME_CHARS = "ab-_.*?[]!^&~|\\zK"
NAMES = ("orders-sink", "orders-eu", "billing-7", "a", "b-a", "zz", "K", "[a]", "a*b", "é")
CLASSES = (
    "org.apache.kafka.connect.errors.ConnectException",
    "org.apache.kafka.connect.errors.DataException",
    "java.net.SocketTimeoutException",
    "java.net.ConnectException",
    "org.apache.kafka.common.config.ConfigException",
    "java.lang.NullPointerException",
    "com.fasterxml.jackson.databind.exc.MismatchedInputException",
    "org.apache.kafka.common.errors.TopicAuthorizationException",
    "x.Y",
)
WORDS = (
    *("timed out", "Refused", "refused", "TIMED", "Unexpected character"),
    *("K", "\u017f", "\u0130d", "x"),
)
REGEX_PIECES = (
    "a",
    "b",
    "K",
    "k",
    "s",
    "timed",
    "out",
    "Exception",
    ".",
    ".*",
    "^",
    "$",
    "\\d",
    "\\w",
    "\\s",
    "\\W",
    "\\b",
    "[a-c]",
    "[^k]",
    "[[:alpha:]]",
    "[\\d.]",
    "\\.",
    "\\x41",
    "\\<",
    "{2}",
    "{,2}",
    "(",
    ")",
    "|",
    "*",
    "+?",
    "?",
    "(?i)",
    "(?s)",
    "(?m)",
    "(?i:",
    "(?:",
    "\\n",
    " ",
    "é",
    "\\pL",
    "\\B",
)

glob_patterns = st.text(NAME_CHARS, min_size=1, max_size=8)
regex_patterns = st.lists(st.sampled_from(REGEX_PIECES), min_size=1, max_size=6).map("".join)


def valid_regex(pattern: str) -> bool:
    try:
        check_regex(pattern)
    except RegexRefused:
        return False
    return True


name_patterns = st.lists(
    glob_patterns
    | st.sampled_from(NAMES)
    | regex_patterns.filter(valid_regex).map(lambda r: {"regex": r}),
    min_size=1,
    max_size=3,
)
message_patterns = st.lists(
    st.sampled_from(WORDS) | st.sampled_from(WORDS).map("(?i){}".format) | regex_patterns,
    min_size=1,
    max_size=3,
).filter(lambda ps: all(valid_regex(p) for p in ps))

CONDITIONS: dict[str, st.SearchStrategy[Any]] = {
    "connect_cluster": name_patterns,
    "connector": name_patterns,
    "connector_class": name_patterns,
    "connector_type": st.sampled_from(["sink", "source"]),
    "task_id": st.lists(st.integers(0, 3), min_size=1, max_size=2),
    "state": st.lists(st.sampled_from(["FAILED", "RUNNING", "PAUSED"]), min_size=1, max_size=2),
    "stage": st.lists(st.sampled_from(["VALUE_CONVERTER", "TASK_PUT"]), min_size=1, max_size=2),
    "failure": st.lists(
        st.sampled_from(list(failures.FAILURE_CLASSES)), min_size=1, max_size=2, unique=True
    ),
    "exception_class": name_patterns,
    "root_cause_class": name_patterns,
    "message": message_patterns,
    "origin_topic": name_patterns,
}


@st.composite
def rule_matches(draw: st.DrawFn) -> dict[str, Any]:
    kinds = draw(
        st.lists(st.sampled_from(sorted(COMPILED_KINDS)), min_size=1, max_size=3, unique=True)
    )
    applicable = sorted(n for n in CONDITIONS if set(kinds) <= CONDITION_KINDS[n])
    match: dict[str, Any] = {"kind": [str(k) for k in kinds]}
    for name in draw(st.lists(st.sampled_from(applicable), max_size=3, unique=True)):
        match[name] = draw(CONDITIONS[name])
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(applicable), min_size=1, max_size=2, unique=True))
        match["unless"] = {name: draw(CONDITIONS[name]) for name in names}
    return match


TRACE_TEXTS = (
    *live.TRACES,
    *(path.read_text() for path in TRACE_FILES),
    "x.Y: timed out\nCaused by: java.net.SocketTimeoutException: Read timed out\n",
    "com.fasterxml.jackson.databind.exc.MismatchedInputException: \u017f K \u0130d\n",
    "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler\n",
    "kafka.Bär: x\n",
    "",
)


@st.composite
def random_errors(draw: st.DrawFn) -> ErrorInfo:
    trace = draw(st.sampled_from(TRACE_TEXTS) | st.text(max_size=60))
    parsed = parse_trace(trace) if trace else None
    error = parsed or ErrorInfo()
    return error.model_copy(
        update={
            "stage": draw(st.sampled_from([None, "VALUE_CONVERTER", "TASK_PUT"])),
            "message": draw(st.sampled_from([error.message, None, *WORDS])),
            "root_cause_message": draw(st.sampled_from([error.root_cause_message, None, *WORDS])),
        }
    )


@st.composite
def random_events(draw: st.DrawFn) -> Any:
    common: dict[str, Any] = {
        "connect_cluster": draw(st.sampled_from(NAMES)),
        "connector": draw(st.sampled_from(NAMES) | st.text(NAME_CHARS, max_size=5)),
        "source": SourceRecord(topic="s", partition=0, offset=0, timestamp_ms=0),
    }
    kind = draw(st.sampled_from(sorted(COMPILED_KINDS)))
    state = draw(st.sampled_from(["FAILED", "RUNNING", "PAUSED", "WEIRD", None]))
    error = draw(st.none() | random_errors())
    if kind is EventKind.TASK_STATUS:
        return TaskStatusEvent(**common, task_id=draw(st.integers(0, 3)), state=state, error=error)
    if kind is EventKind.CONNECTOR_STATUS:
        return ConnectorStatusEvent(**common, state=state, error=error)
    if kind is EventKind.TOPIC_STATUS:
        return TopicStatusEvent(**common, topic="t", task_id=draw(st.none() | st.integers(0, 3)))
    topic = draw(st.sampled_from(NAMES))
    return DlqRecordEvent(
        **common,
        task_id=draw(st.none() | st.integers(0, 3)),
        record=draw(st.none() | st.just(RecordRef(topic=topic, partition=0, offset=1))),
        error=error or ErrorInfo(),
    )


metas = st.sampled_from(
    [
        *live.METAS,
        ConnectorMeta("orders-sink", "sink"),
        ConnectorMeta("K", "source"),
        ConnectorMeta("a*b", "sink"),
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    matches=st.lists(rule_matches(), min_size=1, max_size=4),
    events=st.lists(st.tuples(random_events(), metas), min_size=1, max_size=12),
)
def test_random_rules_on_random_events(matches: list[dict[str, Any]], events: list[Any]) -> None:
    rules = RuleSet(
        Rule.model_validate({"name": f"r{i}", "match": m, "actions": [{"type": "notify"}]})
        for i, m in enumerate(matches)
    )
    try:
        both = Both(rules)
    except ValueError as refused:
        assert_refused_for_a_reason(str(refused), rules)
        return
    for event, meta in events:
        both.check(event, meta)


REFUSALS = (
    "is not carried over",  # \p, \P, \C, \Q, \B
    "case folding (the i flag)",  # with non-ASCII, or a negated class inside a set
    "a repetition of an assertion",
    "a repetition right after a flags group",
    "(?i) plain text beyond ASCII",
    "Python could not compile it",  # a glob whose set `translate` mangles
)


def assert_refused_for_a_reason(reason: str, rules: RuleSet) -> None:
    assert reason.startswith("rule "), reason
    assert any(why in reason for why in REFUSALS), reason
    assert any(f'"{rule.name}"' in reason for rule in rules), reason


# -- the parts alone -----------------------------------------------------------------------------


@settings(max_examples=1500, deadline=None)
@given(pattern=st.text(NAME_CHARS, min_size=1, max_size=10), name=st.text("ab-]!zK\\", max_size=5))
def test_globs_are_fnmatchcase(pattern: str, name: str) -> None:
    try:
        got = offsetd_native.glob_matches(pattern, name)
    except ValueError:
        with pytest.raises((re.error, IndexError)):
            re.compile(fnmatch.translate(pattern))
        return
    assert got == fnmatch.fnmatchcase(name, pattern), (pattern, name)


TEXTS = st.text(
    st.sampled_from([*"abcksKSxy.-_ \n\t\x0b\r0159<{},", "\u212a", "\u017f", "é", "\u0130"]),
    max_size=12,
)


@settings(max_examples=1500, deadline=None)
@given(pattern=regex_patterns, texts=st.lists(TEXTS, min_size=1, max_size=4))
def test_regexes_are_re2s(pattern: str, texts: list[str]) -> None:
    assume(valid_regex(pattern))
    compiled = re2.compile(pattern, re2.Options())
    for how in ("search", "fullmatch"):
        try:
            answers = [offsetd_native.regex_matches(pattern, t, how) for t in texts]
        except ValueError as refused:
            reason = str(refused)
            assert any(why in reason for why in REFUSALS), reason
            return
        expected = [getattr(compiled, how)(t) is not None for t in texts]
        assert answers == expected, (pattern, how, texts)


def test_refused_regexes_say_why() -> None:
    for pattern in ("\\pL", "\\B", "(?i)é", "(?i)[\\W]", "^*", "a(?i)*", "\\Qa\\E", "\\C"):
        with pytest.raises(ValueError, match="regex"):
            offsetd_native.regex_matches(pattern, "a", "search")


def test_the_catalogue_is_pythons() -> None:
    assert offsetd_native.failure_catalog() == list(failures.CATALOG.items())


def native_classify(error: ErrorInfo | None) -> tuple[str, str] | None:
    return offsetd_native.classify(None if error is None else error.model_dump_json())


@pytest.mark.parametrize("path", TRACE_FILES, ids=lambda p: p.stem)
def test_the_classifier_on_recorded_traces(path: Path) -> None:
    error = parse_trace(path.read_text())
    assert error is not None
    found = failures._classify(error)
    assert native_classify(error) == (found.failure, found.because)
    assert found.failure == path.stem.split("--")[0]


@settings(max_examples=1000, deadline=None)
@given(error=st.none() | random_errors())
def test_the_classifier_on_random_errors(error: ErrorInfo | None) -> None:
    got = native_classify(error)
    if got is None:
        assert error is not None
        assert undecided_because_unicode(error)
        return
    found = failures.classify(None) if error is None else failures._classify(error)
    assert got == (found.failure, found.because)


CLASS_LINE_CHARS = st.sampled_from(
    [*"aZ_$.:0 \n\t", "Caused by: ", "java.", "Exception", "é", "\u212a", "org.apache.x.Y"]
)


@settings(max_examples=1500, deadline=None)
@given(head=st.lists(CLASS_LINE_CHARS, max_size=12).map("".join))
def test_the_classifier_reads_class_lines_as_python(head: str) -> None:
    error = ErrorInfo(trace_head=head + "\nCaused by: java.lang.ClassNotFoundException: x")
    expected = failures._classify(error)
    got = native_classify(error)
    if got is None:
        assert undecided_because_unicode(error)
    else:
        assert got == (expected.failure, expected.because)
    # and without a configuration class behind: the lines' own classes decide
    lines = ErrorInfo(trace_head=head, root_cause_class="x.Unknown")
    got = native_classify(lines)
    if got is not None:
        found = failures._classify(lines)
        assert got == (found.failure, found.because)


def test_lower_case_brings_ascii_only_from_ascii_kelvin_and_dotted_i() -> None:
    """What the `(?i)` plain-text search relies on to lower-case without Python's tables."""
    makers = [
        chr(c)
        for c in range(0x80, 0x110000)
        if not 0xD800 <= c <= 0xDFFF and any(ch.isascii() for ch in chr(c).lower())
    ]
    assert makers == ["\u0130", "\u212a"]
    assert "\u0130".lower() == "i\u0307"
    assert "\u212a".lower() == "k"


def test_a_trace_that_needs_pythons_unicode_is_left_to_python() -> None:
    rules = RuleSet(
        [
            Rule.model_validate(
                {
                    "name": "poison",
                    "match": {"kind": "task_status", "failure": "poison_record"},
                    "actions": [{"type": "notify"}],
                }
            )
        ]
    )
    native = offsetd_native.Matcher(rule_program(rules))
    source = SourceRecord(topic="s", partition=0, offset=0, timestamp_ms=0)
    error = parse_trace("kafka.Bär: boom\n")
    assert error is not None
    event = TaskStatusEvent(
        connect_cluster="c", connector="x", source=source, task_id=0, state="FAILED", error=error
    )
    assert native.matched(event.model_dump_json(), None) is None
    running = event.model_copy(update={"state": "RUNNING", "task_id": 5})
    assert native.matched(running.model_dump_json(), None) is None  # the failure is still asked
    other = TopicStatusEvent(connect_cluster="c", connector="x", source=source, topic="t")
    assert native.matched(other.model_dump_json(), None) == []


def test_a_refused_program_names_the_rule_and_the_pattern() -> None:
    rules = RuleSet(
        [
            Rule.model_validate(
                {
                    "name": "greek",
                    "match": {"kind": "task_status", "connector": {"regex": "\\p{Greek}+"}},
                    "actions": [{"type": "notify"}],
                }
            )
        ]
    )
    with pytest.raises(ValueError, match=r'rule "greek": regex "\\\\p\{Greek\}\+"'):
        offsetd_native.Matcher(rule_program(rules))


def test_the_exported_conditions() -> None:
    program = json.loads(rule_program(live.rules()))
    r8 = program["rules"][8]["matcher"]
    assert r8 == {
        "kinds": ["task_status"],
        "states": ["FAILED"],
        "conditions": [{"name": "message", "patterns": ["refused"], "required": None}],
        "unless": [{"name": "connector_class", "patterns": [{"glob": "*Debezium*"}]}],
    }
    r2 = program["rules"][2]["matcher"]["conditions"][0]
    assert r2["required"] == {"plain": ["org.apache."], "folded": []}
