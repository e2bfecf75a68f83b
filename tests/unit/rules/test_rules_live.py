"""`RuleSet.live`, the remembered matcher, against the predicates run every time.

The engine asks `live` which of an event's candidates match, and `live` remembers the answer
per candidates, task id, error instance and failing record's topic. These random streams share
and repeat errors (as the decoders' memos do) and also bring equal errors as fresh instances,
and check that every answer is what the rules' own predicates say, event by event.
"""

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from offsetd.events.models import (
    ConnectorStatusEvent,
    DlqRecordEvent,
    ErrorInfo,
    RecordRef,
    SourceRecord,
    TaskStatusEvent,
    TopicStatusEvent,
)
from offsetd.rules import ConnectorMeta, Rule, RuleSet

METAS = (
    None,
    ConnectorMeta("io.confluent.connect.jdbc.JdbcSinkConnector", "sink"),
    ConnectorMeta("io.debezium.connector.postgresql.PostgresConnector", "source"),
)
CONNECTORS = ("orders-sink", "orders-source", "billing-sink", "audit-es")
STATES = ("RUNNING", "FAILED", "UNASSIGNED", None)

RULES: list[dict[str, Any]] = [
    {"kind": ["task_status", "connector_status"], "state": "FAILED"},
    {"kind": "task_status", "state": "FAILED", "message": ["(?i)timed out", "refused"]},
    {"kind": "task_status", "state": "FAILED", "message": ["^org\\.apache\\..*Exception"]},
    {"kind": "task_status", "exception_class": "*ConnectException", "task_id": [0, 2]},
    {"kind": "task_status", "root_cause_class": "*.SocketTimeoutException"},
    {"kind": ["task_status", "dlq_record"], "failure": ["poison_record", "transient"]},
    {"kind": "task_status", "state": "RUNNING", "task_id": [1]},
    {"kind": "connector_status", "connector": "orders-*", "connector_type": "sink"},
    {
        "kind": "task_status",
        "state": "FAILED",
        "message": ["refused"],
        "unless": {"connector_class": "*Debezium*"},
    },
    {"kind": "dlq_record", "stage": ["VALUE_CONVERTER"], "origin_topic": "orders*"},
    {"kind": "dlq_record", "origin_topic": "billing-?", "task_id": [0, 1]},
    {"kind": "dlq_record", "message": ["Unexpected character"], "unless": {"stage": ["TASK_PUT"]}},
    {"kind": "topic_status", "connector": "audit-*"},
]

TRACES = (
    "org.apache.kafka.connect.errors.ConnectException: Tolerance exceeded in error handler\n"
    "\tat X.y(X.java:1)\n"
    "Caused by: org.apache.kafka.connect.errors.DataException: Converting byte[] failed\n"
    "Caused by: org.apache.kafka.common.errors.SerializationException: Unexpected character\n",
    "org.apache.kafka.connect.errors.ConnectException: java.net.ConnectException: refused\n"
    "Caused by: java.net.ConnectException: Connection refused\n",
    "java.lang.NullPointerException\n\tat com.example.Sink.put(Sink.java:10)\n",
    "org.apache.kafka.connect.errors.RetriableException: timed out\n"
    "Caused by: java.net.SocketTimeoutException: Read timed out\n",
)


def rules() -> RuleSet:
    return RuleSet(
        Rule.model_validate({"name": f"r{i}", "match": m, "actions": [{"type": "notify"}]})
        for i, m in enumerate(RULES)
    )


def errors(rng: random.Random) -> list[ErrorInfo]:
    """A few errors; callers reuse these instances (the decoders' memos) or copy them."""
    out = []
    for trace in TRACES:
        first, _, rest = trace.partition("\n")
        klass, _, message = first.partition(": ")
        for stage in ("VALUE_CONVERTER", "TASK_PUT", None):
            out.append(
                ErrorInfo(
                    exception_class=klass,
                    message=message or None,
                    root_cause_class=rest.rpartition("Caused by: ")[2].partition(":")[0] or klass,
                    stage=stage,
                    trace_head=trace,
                )
            )
    rng.shuffle(out)
    return out


def event(rng: random.Random, pool: list[ErrorInfo], offset: int) -> Any:
    connector = rng.choice(CONNECTORS)
    source = SourceRecord(topic="s", partition=0, offset=offset, timestamp_ms=offset)
    error = rng.choice(pool)
    if rng.random() < 0.2:  # an equal error, another instance (a memo that was cleared)
        error = error.model_copy()
    kind = rng.random()
    common: dict[str, Any] = {"connect_cluster": "c", "connector": connector, "source": source}
    if kind < 0.4:
        state = rng.choice(STATES)
        failed = error if state == "FAILED" else None
        return TaskStatusEvent(**common, task_id=rng.randrange(4), state=state, error=failed)
    if kind < 0.55:
        state = rng.choice(STATES)
        failed = error if state == "FAILED" else None
        return ConnectorStatusEvent(**common, state=state, error=failed)
    if kind < 0.6:
        return TopicStatusEvent(**common, topic=rng.choice(("orders", "audit")))
    topic = rng.choice(("orders", "orders-eu", "billing-7", "billing-x"))
    record = RecordRef(topic=topic, partition=1, offset=offset) if rng.random() < 0.9 else None
    task_id = rng.choice((0, 1, 2, None))
    return DlqRecordEvent(**common, task_id=task_id, record=record, error=error)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), count=st.integers(1, 400))
def test_live_answers_what_the_predicates_say(seed: int, count: int) -> None:
    rng = random.Random(seed)  # noqa: S311 (a reproducible mix, not a secret)
    ruleset = rules()
    pool = errors(rng)
    for offset in range(count):
        e = event(rng, pool, offset)
        meta = rng.choice(METAS)
        candidates = ruleset.candidates(e, meta)
        expected = tuple(r for r in candidates if r.dynamic is None or r.dynamic(e, meta))
        assert ruleset.live(candidates, e, meta) == expected
        assert ruleset.matched(e, meta) == expected  # the engine's one lookup
        # and the slow, self-contained check agrees with both
        slow = [r for r in ruleset.rules if r.matches(e, meta) and (meta or not r.needs_meta)]
        assert list(expected) == slow


def test_the_memo_stays_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr("offsetd.rules.ruleset._LIVE_CACHE_LIMIT", 10)
    ruleset = rules()
    rng = random.Random(7)  # noqa: S311 (a reproducible mix, not a secret)
    pool = errors(rng)
    for offset in range(200):
        e = event(rng, [rng.choice(pool).model_copy()], offset)  # a new error instance each time
        candidates = ruleset.candidates(e, None)
        expected = tuple(r for r in candidates if r.dynamic is None or r.dynamic(e, None))
        assert ruleset.live(candidates, e, None) == expected
        assert len(ruleset._live) <= 10


def test_rules_on_the_error_alone_answer_once_per_error() -> None:
    """A rule whose conditions (and `unless`) read only the error is asked once per error
    instance, whatever the connector, task or metadata; the others every time."""
    ruleset = rules()
    only = {r.name for r in ruleset if r.error_only}
    # r3 reads the task id, r7 has no dynamic condition, r8's unless reads the class, r9 and
    # r10 the record's topic
    assert only == {"r1", "r2", "r4", "r5", "r11"}
    asked: list[str] = []
    for rule in ruleset:
        if rule.dynamic is not None:
            test = rule.dynamic

            def counted(e: Any, m: Any, name: str = rule.name, test: Any = test) -> bool:
                asked.append(name)
                return bool(test(e, m))

            object.__setattr__(rule, "dynamic", counted)
    rng = random.Random(11)  # noqa: S311 (a reproducible mix, not a secret)
    error = errors(rng)[0]
    for offset in range(40):
        source = SourceRecord(topic="s", partition=0, offset=offset, timestamp_ms=offset)
        e = TaskStatusEvent(
            connect_cluster="c",
            connector=CONNECTORS[offset % len(CONNECTORS)],
            source=source,
            task_id=offset % 4,
            state="FAILED",
            error=error,
        )
        meta = METAS[offset % len(METAS)]
        ruleset.matched(e, meta)
    assert only & set(asked) == {"r1", "r2", "r4", "r5"}  # r11 is on DLQ records
    assert all(asked.count(name) == 1 for name in only & set(asked))
    assert asked.count("r3") > 1  # on the task id: per task (and connector)


def test_the_verdicts_stay_bounded(monkeypatch: Any) -> None:
    monkeypatch.setattr("offsetd.rules.ruleset._VERDICT_CACHE_LIMIT", 5)
    ruleset = rules()
    rng = random.Random(5)  # noqa: S311 (a reproducible mix, not a secret)
    pool = errors(rng)
    for offset in range(300):
        e = event(rng, [rng.choice(pool).model_copy()], offset)  # a new error instance each time
        meta = rng.choice(METAS)
        candidates = ruleset.candidates(e, meta)
        expected = tuple(r for r in candidates if r.dynamic is None or r.dynamic(e, meta))
        assert ruleset.matched(e, meta) == expected
        assert len(ruleset._verdicts) <= 5
