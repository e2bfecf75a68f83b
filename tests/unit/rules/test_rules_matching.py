"""offsetd.rules.matching: each condition, the index, the caches and `explain`."""

from typing import Any

import pytest

from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    RecordRef,
    SourceOffsetEvent,
    SourceRecord,
    TaskStatusEvent,
    TopicStatusEvent,
    error_from_trace,
)
from offsetd.rules import ConnectorMeta, Rule, RuleSet, explain
from offsetd.rules.matching import AnyEvent
from offsetd.rules.patterns import _required_literals, any_regex
from offsetd.saferegex import RegexRefused, compile_regex

SINK = ConnectorMeta("io.confluent.connect.jdbc.JdbcSinkConnector", "sink")
SOURCE = ConnectorMeta("io.debezium.connector.postgresql.PostgresConnector", "source")

POISON_TRACE = """\
org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler
\tat org.apache.kafka.connect.runtime.errors.RetryWithToleranceOperator.execAndHandleError(X.java:1)
Caused by: org.apache.kafka.connect.errors.DataException: Converting byte[] failed
Caused by: org.apache.kafka.common.errors.SerializationException: Unexpected character ('o')
"""


def src(offset: int = 0, topic: str = "connect-status") -> SourceRecord:
    return SourceRecord(topic=topic, partition=0, offset=offset, timestamp_ms=0)


def task(
    state: str | None = "FAILED",
    *,
    connector: str = "orders-sink",
    task_id: int = 0,
    trace: str | None = POISON_TRACE,
    cluster: str = "local",
) -> TaskStatusEvent:
    return TaskStatusEvent(
        connect_cluster=cluster,
        connector=connector,
        source=src(),
        task_id=task_id,
        state=state,
        error=error_from_trace(trace) if state == "FAILED" else None,
    )


def dlq(
    *,
    connector: str = "orders-sink",
    topic: str = "orders",
    stage: str = "VALUE_CONVERTER",
    exception: str = "org.apache.kafka.connect.errors.DataException",
    message: str = "Converting byte[] failed",
    task_id: int | None = 0,
) -> DlqRecordEvent:
    return DlqRecordEvent(
        connect_cluster="local",
        connector=connector,
        source=src(topic="dlq"),
        task_id=task_id,
        record=RecordRef(topic=topic, partition=3, offset=1200),
        error=ErrorInfo(exception_class=exception, message=message, stage=stage),
    )


def ruleset(*matches: dict[str, Any]) -> RuleSet:
    return RuleSet(
        Rule.model_validate({"name": f"r{i}", "match": m, "actions": [{"type": "notify"}]})
        for i, m in enumerate(matches)
    )


def matches(match: dict[str, Any], event: AnyEvent, meta: ConnectorMeta | None = SINK) -> bool:
    rules = ruleset(match)
    found = [r.name for r in rules.matching(event, meta)]
    # the slow, self-contained check agrees with the indexed hot path
    assert rules.rules[0].matches(event, meta) == bool(found)
    return bool(found)


def test_kind_one_or_many() -> None:
    assert matches({"kind": "task_status"}, task())
    assert not matches({"kind": "task_status"}, dlq())
    assert matches({"kind": ["dlq_record", "task_status"]}, dlq())
    connector = ConnectorStatusEvent(
        connect_cluster="local", connector="c", source=src(), state="RUNNING"
    )
    topic = TopicStatusEvent(connect_cluster="local", connector="c", source=src(), topic="t")
    offsets = SourceOffsetEvent(
        connect_cluster="local", connector="c", source=src(), partition={"f": "a"}, offset=None
    )
    assert matches({"kind": "connector_status"}, connector)
    assert matches({"kind": "topic_status"}, topic)
    assert matches({"kind": "source_offset"}, offsets)
    assert not matches({"kind": "source_offset"}, topic)


def test_connect_cluster() -> None:
    assert matches({"kind": "task_status", "connect_cluster": "local"}, task())
    assert not matches({"kind": "task_status", "connect_cluster": "prod-*"}, task())
    assert matches({"kind": "task_status", "connect_cluster": "prod-*"}, task(cluster="prod-eu"))


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("orders-sink", "orders-sink", True),
        ("orders-sink", "orders-sink-2", False),
        ("orders-*", "orders-eu-sink", True),
        ("orders-?-sink", "orders-1-sink", True),
        ("*-sink", "orders-source", False),
        ({"regex": "orders-(eu|us)-sink"}, "orders-eu-sink", True),
        ({"regex": "orders-(eu|us)-sink"}, "orders-eu-sink-old", False),  # anchored
        ({"regex": "(?i)ORDERS-.*"}, "orders-x", True),
        (["a", "orders-*"], "orders-x", True),
        (["a", {"regex": "b.*"}], "orders-x", False),
    ],
)
def test_connector_globs_and_regexes(pattern: Any, name: str, expected: bool) -> None:
    assert matches({"kind": "task_status", "connector": pattern}, task(connector=name)) is expected


def test_connector_class_and_type_need_metadata() -> None:
    m = {"kind": "task_status", "connector_class": "io.confluent.connect.jdbc.*"}
    assert matches(m, task(), SINK)
    assert not matches(m, task(), SOURCE)
    assert not matches(m, task(), None)
    assert matches({"kind": "task_status", "connector_type": "sink"}, task(), SINK)
    assert not matches({"kind": "task_status", "connector_type": "sink"}, task(), SOURCE)
    assert not matches({"kind": "task_status", "connector_type": "sink"}, task(), None)


def test_task_id() -> None:
    assert matches({"kind": "task_status", "task_id": [0, 2]}, task(task_id=2))
    assert not matches({"kind": "task_status", "task_id": 1}, task(task_id=2))
    assert matches({"kind": "dlq_record", "task_id": 0}, dlq())
    assert not matches({"kind": "dlq_record", "task_id": 0}, dlq(task_id=None))


def test_state() -> None:
    assert matches({"kind": "task_status", "state": "FAILED"}, task())
    assert matches({"kind": "task_status", "state": ["RUNNING", "PAUSED"]}, task("PAUSED"))
    assert not matches({"kind": "task_status", "state": "FAILED"}, task("RUNNING"))
    assert not matches({"kind": "task_status", "state": "FAILED"}, task(None))  # tombstone
    # no state condition: every state, tombstones and unknown states included
    assert matches({"kind": "task_status"}, task(None))
    assert matches({"kind": "task_status"}, task("SOMETHING_NEW"))
    assert not matches({"kind": "task_status", "state": "RUNNING"}, task("SOMETHING_NEW"))


def test_stage() -> None:
    assert matches({"kind": "dlq_record", "stage": "VALUE_CONVERTER"}, dlq())
    assert matches({"kind": "dlq_record", "stage": ["TASK_PUT", "VALUE_CONVERTER"]}, dlq())
    assert not matches({"kind": "dlq_record", "stage": "TASK_PUT"}, dlq())


def test_exception_class_matches_outer_or_root() -> None:
    outer = "org.apache.kafka.connect.errors.ConnectException"
    root = "org.apache.kafka.common.errors.SerializationException"
    middle = "org.apache.kafka.connect.errors.DataException"
    assert matches({"kind": "task_status", "exception_class": outer}, task())
    assert matches({"kind": "task_status", "exception_class": root}, task())
    assert not matches({"kind": "task_status", "exception_class": middle}, task())
    assert matches({"kind": "task_status", "exception_class": "*SerializationException"}, task())
    assert not matches({"kind": "task_status", "exception_class": outer}, task("RUNNING"))
    assert matches({"kind": "dlq_record", "exception_class": "*.DataException"}, dlq())


def test_root_cause_class_only_the_root() -> None:
    root = "org.apache.kafka.common.errors.SerializationException"
    outer = "org.apache.kafka.connect.errors.ConnectException"
    assert matches({"kind": "task_status", "root_cause_class": root}, task())
    assert not matches({"kind": "task_status", "root_cause_class": outer}, task())
    # a trace without "Caused by:" has its own class as root cause
    single = task(trace="java.net.SocketTimeoutException: Read timed out")
    assert matches({"kind": "task_status", "root_cause_class": "java.net.*"}, single)
    assert not matches({"kind": "dlq_record", "root_cause_class": "*"}, dlq())  # DLQ: none


def test_message_searches_message_root_message_and_trace_head() -> None:
    m = {"kind": "task_status", "message": "Tolerance exceeded"}
    assert matches(m, task())  # the outer message
    assert matches({"kind": "task_status", "message": "Unexpected character"}, task())  # root
    assert matches({"kind": "task_status", "message": r"RetryWithToleranceOperator\."}, task())
    assert matches({"kind": "task_status", "message": "(?i)TOLERANCE"}, task())
    # each text is searched on its own: ^ anchors at the start of the message, the root cause
    # message or the trace head, not at every line of the trace
    assert matches({"kind": "task_status", "message": "^Tolerance"}, task())
    assert matches({"kind": "task_status", "message": "^Unexpected"}, task())
    assert not matches({"kind": "task_status", "message": "^Converting"}, task())
    assert not matches(m, task("RUNNING"))
    assert matches({"kind": "dlq_record", "message": ["nope", "byte\\[\\]"]}, dlq())


def test_message_reads_only_the_bounded_trace_head() -> None:
    far = POISON_TRACE + "\tat x.y(Z.java:1)\n" * 400 + "Caused by: com.example.Hidden: needle\n"
    event = task(trace=far)
    assert event.error is not None
    assert len(event.error.trace_head) == 4096
    assert not matches({"kind": "task_status", "message": "needle"}, event)


def test_origin_topic() -> None:
    assert matches({"kind": "dlq_record", "origin_topic": "orders"}, dlq())
    assert matches({"kind": "dlq_record", "origin_topic": "ord*"}, dlq())
    assert not matches({"kind": "dlq_record", "origin_topic": "payments"}, dlq())


def test_all_conditions_must_hold() -> None:
    m = {"kind": "dlq_record", "connector": "orders-*", "stage": "VALUE_CONVERTER", "task_id": 0}
    assert matches(m, dlq())
    assert not matches(m, dlq(connector="payments-sink"))
    assert not matches(m, dlq(stage="TASK_PUT"))


def test_unless_excludes_when_all_of_its_conditions_hold() -> None:
    m = {
        "kind": "task_status",
        "state": "FAILED",
        "unless": {"exception_class": "*AuthenticationException", "connector": "legacy-*"},
    }
    auth = "org.apache.kafka.common.errors.SaslAuthenticationException: bad password"
    assert matches(m, task(trace=auth))  # only one of the two unless conditions holds
    assert not matches(m, task(trace=auth, connector="legacy-sink"))
    assert matches(m, task(connector="legacy-sink"))


def test_candidates_are_cached_per_connector_and_metadata() -> None:
    rules = ruleset(
        {"kind": "task_status", "connector_type": "sink"},
        {"kind": "task_status", "connector": "orders-*"},
    )
    event = task()
    assert [r.name for r in rules.matching(event, SINK)] == ["r0", "r1"]
    assert [r.name for r in rules.matching(event, SOURCE)] == ["r1"]  # metadata changed
    assert [r.name for r in rules.matching(event, None)] == ["r1"]
    assert [r.name for r in rules.matching(task(connector="x"), SINK)] == ["r0"]
    assert [r.name for r in rules.matching(event, SINK)] == ["r0", "r1"]


def test_rules_keep_their_load_order() -> None:
    rules = ruleset(
        {"kind": "task_status"}, {"kind": "task_status", "state": "FAILED"}, {"kind": "task_status"}
    )
    assert [r.name for r in rules.matching(task(), SINK)] == ["r0", "r1", "r2"]


def test_any_regex_joins_or_falls_back() -> None:
    search = any_regex(["(?i)abc", "x+y", "(?s)a.b"], "search")
    assert search("..ABC..")
    assert search("a\nb")
    assert search("xxy")
    assert not search("nothing")
    full = any_regex(["ab", "(?i)cd"], "fullmatch")
    assert full("CD")
    assert not full("abc")
    ungreedy = any_regex(["(?U)a+", "(?s)x.y"], "fullmatch")
    assert ungreedy("aaa")
    assert ungreedy("x\ny")
    # flags RE2 does not know are refused when the rule loads, not at match time
    with pytest.raises(RegexRefused, match=r"invalid regex: invalid perl operator: \(\?a"):
        any_regex(["(?a)\\w+"], "fullmatch")


def test_explain_says_why() -> None:
    rules = RuleSet(
        Rule.model_validate(r)
        for r in [
            {"name": "dlq", "match": {"kind": "dlq_record"}, "actions": [{"type": "pause"}]},
            {
                "name": "typed",
                "match": {"kind": "task_status", "connector_type": "sink"},
                "actions": [{"type": "notify"}],
            },
            {
                "name": "running-only",
                "match": {"kind": "task_status", "state": "RUNNING", "task_id": 3},
                "actions": [{"type": "notify"}],
            },
            {
                "name": "unless-auth",
                "match": {"kind": "task_status", "unless": {"message": "Tolerance"}},
                "actions": [{"type": "notify"}],
            },
            {
                "name": "yes",
                "enabled": False,
                "match": {"kind": "task_status", "root_cause_class": "*SerializationException"},
                "when": {"count": 3, "within": "10m"},
                "actions": [{"type": "notify"}],
            },
        ]
    )
    lines = explain(task(), rules, None)
    assert lines == [
        "dlq: no match: kind is task_status, rule wants dlq_record",
        "typed: no match: connector_type needs connector metadata (class/type) and none is known",
        "running-only: no match: task_id wants 3, event has 0; state wants RUNNING, event has "
        "FAILED",
        "unless-auth: no match: excluded by unless (message holds)",
        "yes: matches (counts toward 3 within 10m per connector) (rule disabled: decisions are "
        "suppressed)",
    ]
    assert (
        explain(task(), rules, SOURCE)[1]
        == "typed: no match: connector_type wants 'sink', event has 'source'"
    )


# -- required literals: a substring prefilter in front of message regexes ----------------------

PREFILTERED = [
    [r"Not authorized to access (topics|group)"],
    [r"HikariPool-\d+ - Connection is not available"],
    [r"No space left on device|[Dd]isk quota exceeded"],
    [r"^org\.apache\.kafka\.connect\.errors\.ConnectException: java\.net\."],
    ["Schema not found", r"(?i)subject \S+ not found"],
    [r"(?i)timed out|refused"],
    [r"(?m)^Caused by: \S+Timeout"],
    [r"a.b"],  # no literal of 3 characters: the regex always runs
    ["(?i)stra\u00dfe"],  # non-ASCII under (?i): no prefilter
    [r"[[:digit:]]ms timed out"],  # a POSIX class (RE2): Python reads "]ms timed out"
]
TEXTS = [
    "",
    "Not authorized to access group: g",
    "HikariPool-1 - Connection is not available, request timed out after 30000ms.",
    "Disk quota exceeded",
    "org.apache.kafka.connect.errors.ConnectException: java.net.ConnectException: refused",
    "x\norg.apache.kafka.connect.errors.ConnectException: java.net.X",
    "SUBJECT orders-value NOT FOUND",
    "subject \u017fx not found",
    "Connection TIMED OUT",
    "Caused by: java.net.SocketTimeoutException: Read timed out",
    "x\nCaused by: org.apache.kafka.common.errors.TimeoutException: t",
    "axb STRASSE stra\u00dfe",
    "\u212a timed out",
    "request 42ms timed out",
]


@pytest.mark.parametrize("patterns", PREFILTERED)
def test_the_literal_prefilter_never_changes_a_search(patterns: list[str]) -> None:
    found = any_regex(patterns, "search")
    for text in TEXTS:
        # the same answer as the engine without the prefilter (RE2, one pattern at a time)
        expected = any(compile_regex(p).search(text) for p in patterns)
        assert found(text) is bool(expected), (patterns, text)


def test_required_literals_of_message_regexes() -> None:
    assert _required_literals([r"HikariPool-\d+ - Connection"]) == ([" - Connection"], [])
    assert _required_literals([r"(?i)timed out|refused"]) == ([], ["timed out", "refused"])
    assert _required_literals([r"a.b"]) is None
    assert _required_literals([r"(x|\d+)"]) is None


def test_every_condition_of_the_format_has_a_compiler() -> None:
    from offsetd.rules.conditions import _BUILDERS
    from offsetd.rules.models import CONDITION_KINDS

    assert list(_BUILDERS) == list(CONDITION_KINDS)
