"""Bad records in a row, a configuration bad for every record, and a new sink whose first record
is bad: healed (or stopped) by the shipped rules, as a user meets them.

- Two bad records next to each other (offsets 30 and 31): one incident. The skip of 30 is
  followed at once by a failure at 31; that is a new bad record, not a skip that did not help.
  Both are quarantined once, every good record is delivered once, no breaker.
- Five in a row, with a DLQ and without.
- A value converter wrong for every record of the topic: at most the first record is skipped,
  the breaker opens, and the audit and the notification say "every record fails: likely
  configuration".
- A new sink without a DLQ whose first record is bad, with Connect's default `earliest` and with
  `auto.offset.reset=latest`: nothing is committed yet, so the record is located from where the
  consumer starts (the log start; the log end when the failed run began). With `latest` a plain
  restart would start past the bad record and every record written since: they must still all
  be delivered.

The shipped rules run in enforce mode with the restart rule's backoff and cooldown shortened
through the rule's own settings (1 s doubling, instead of 30 s doubling with a 20 s cooldown):
its real timing is proven once, in test_heal_in_the_field. Everything else is as shipped.

About 2 minutes in one lane: four daemons, and each bad record of a run is located with
one-record batches (a config change and a task restart each).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from offsetd.devstack.stack import StackInfo
from offsetd.remediation.locate import MAX_POLL_RECORDS_KEY
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import (
    POISON,
    Setup,
    Sink,
    cleanup,
    committed,
    daemon_setup,
    good,
    ours,
    task_states,
    wait_committed,
)
from tests.integration.test_heal_in_the_field import delivered, quick_shipped_rules
from tests.integration.test_skip_without_dlq import config_of

pytestmark = pytest.mark.integration

# Other tests' leftovers on the shared stack must not hold these skips (the blast radius has its
# own tests).
REMEDIATION = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}


def bad(n: int) -> tuple[bytes, bytes]:
    return (f"bad{n}".encode(), f"{{not json {n}".encode())


def skip_outcomes(setup: Setup, connector: str) -> list[dict[str, Any]]:
    return [
        r
        for r in setup.outcomes(connector)
        if any(a["type"] == "skip-record" for a in r["actions"])
    ]


def wait_run(setup: Setup, connector: str, timeout_s: float = 300) -> dict[str, Any]:
    """The skip outcome of `connector` (the first one that is not a guard's hold)."""

    def probe() -> dict[str, Any] | None:
        setup._alive()
        done = [r for r in skip_outcomes(setup, connector) if r["outcome"] != "awaiting_approval"]
        return done[0] if done else None

    try:
        return wait_for(f"{connector}: a skip outcome", probe, timeout_s)
    except AssertionError as timed_out:
        log = setup.daemon.log()[-8000:] if setup.daemon is not None else ""
        seen = [(r["rule"], r["outcome"], r["message"]) for r in setup.outcomes(connector)]
        raise AssertionError(f"{timed_out}\noutcomes: {seen}\ndaemon log:\n{log}") from None


def quarantined_offsets(setup: Setup, sink: Sink) -> list[int]:
    return sorted(
        q.original.offset
        for q in ours(setup, setup.quarantined())
        if q.original is not None and q.connector == sink.name
    )


def breakers(setup: Setup) -> dict[str, str]:
    listed = setup.cli("breaker", "list", "-o", "json")
    assert listed.exit_code == 0, listed.output
    import json

    return {b["connector"]: b.get("why", "") for b in json.loads(listed.stdout)}


def assert_run_healed(
    connect: ConnectClient,
    setup: Setup,
    sink: Sink,
    bad_offsets: list[int],
    good_numbers: list[int],
    end: int,
    original: dict[str, str],
) -> dict[str, Any]:
    done = wait_run(setup, sink.name)
    assert done["outcome"] == "executed", done
    wait_for(
        f"{sink.name} to deliver every good record",
        lambda: len(sink.lines()) >= len(good_numbers),
        timeout_s=60,
    )
    time.sleep(2)  # a record delivered twice would show by now
    assert delivered(sink) == good_numbers, sink.name
    assert quarantined_offsets(setup, sink) == bad_offsets
    assert committed(connect, sink.name) == end
    assert task_states(connect, sink.name) == ["RUNNING"]
    config = config_of(connect, sink.name)
    assert MAX_POLL_RECORDS_KEY not in config
    assert config == original
    assert sink.name not in breakers(setup)
    assert [r["offset"] for r in done["run"]["records"]] == bad_offsets, done["run"]
    executed = [r for r in skip_outcomes(setup, sink.name) if r["outcome"] == "executed"]
    assert len(executed) == 1, executed  # one incident, one decision
    return done


def test_two_bad_records_in_a_row_are_one_incident(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """30 good records delivered and committed first, then two bad ones and 30 good: the batch
    that fails starts with the first bad record (the DLQ names it, nothing to deliver first)."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=REMEDIATION) as setup:
        quick_shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        topic = unique(f"{setup.prefix}-two")
        create_topic(setup.west, topic)
        produce(setup.west, topic, good(range(30)))
        sink = Sink(f"{setup.prefix}-two", topic, tmp_path / "two.txt")
        connect.create(sink.name, dlq_json_file_sink(topic, sink.out, setup.dlq))
        try:
            connect.wait_running(sink.name)
            wait_committed(connect, sink, 30)
            original = config_of(connect, sink.name)
            daemon = setup.start()
            offsets = produce(setup.west, topic, [bad(1), bad(2), *good(range(30, 60))])
            assert offsets[:2] == [30, 31]
            done = assert_run_healed(connect, setup, sink, [30, 31], list(range(60)), 62, original)
            assert done["message"].startswith(
                f"skipped a run of 2 bad records at {topic}-0@30..31 in {sink.name}"
            ), done
            assert daemon.metric("offsetd_records_skipped_total", connector=sink.name) == 2
            assert daemon.metric("offsetd_breaker_open", connector=sink.name) == 0
        finally:
            cleanup(connect, sink)


def test_five_bad_records_in_a_row_with_and_without_a_dlq(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """With a DLQ: everything written before the sink starts, so the run sits mid-batch (the
    good records before it are delivered one by one first). Without: the good records are
    delivered and committed before the bad ones come."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=REMEDIATION) as setup:
        quick_shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        records = [*good(range(30)), *(bad(i) for i in range(5)), *good(range(30, 60))]
        with_dlq = Sink(f"{setup.prefix}-dlq", unique(f"{setup.prefix}-dlq"), tmp_path / "d.txt")
        no_dlq = Sink(f"{setup.prefix}-nodlq", unique(f"{setup.prefix}-nd"), tmp_path / "n.txt")
        for sink in (with_dlq, no_dlq):
            create_topic(setup.west, sink.topic)
        produce(setup.west, with_dlq.topic, records)
        produce(setup.west, no_dlq.topic, records[:30])
        try:
            setup.start()
            connect.create(
                with_dlq.name, dlq_json_file_sink(with_dlq.topic, with_dlq.out, setup.dlq)
            )
            connect.create(
                no_dlq.name,
                json_file_sink(no_dlq.topic, no_dlq.out, **{"errors.tolerance": "none"}),
            )
            wait_committed(connect, no_dlq, 30)
            produce(setup.west, no_dlq.topic, records[30:])
            originals = {s.name: config_of(connect, s.name) for s in (with_dlq, no_dlq)}
            for sink in (with_dlq, no_dlq):
                done = assert_run_healed(
                    connect, setup, sink, list(range(30, 35)), list(range(60)), 65,
                    originals[sink.name],
                )  # fmt: skip
                assert f"a run of 5 bad records at {sink.topic}-0@30..34" in done["message"]
        finally:
            cleanup(connect, with_dlq, no_dlq)


def test_a_converter_wrong_for_every_record_stops_after_one_and_names_the_likely_cause(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """A new JSON sink on a topic of CSV lines: every record fails conversion. The first may be
    skipped (a new sink's first record can be a lone bad one); the second failure, with no
    record ever delivered by this configuration, is the configuration."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=REMEDIATION) as setup:
        quick_shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        sink = Sink(f"{setup.prefix}-csv", unique(f"{setup.prefix}-csv"), tmp_path / "csv.txt")
        create_topic(setup.west, sink.topic)
        produce(
            setup.west, sink.topic, [(None, f"{i},order-{i},12.50".encode()) for i in range(20)]
        )
        try:
            daemon = setup.start()
            connect.create(sink.name, dlq_json_file_sink(sink.topic, sink.out, setup.dlq))
            done = wait_run(setup, sink.name)
            assert done["outcome"] == "failed", done
            assert done["message"].startswith("every record fails: likely configuration"), done
            assert done["breaker"] == "every_record_fails"
            assert quarantined_offsets(setup, sink) in ([], [0])
            assert sink.name in breakers(setup)
            assert breakers(setup)[sink.name].startswith("every record fails: likely configuration")
            assert daemon.metric("offsetd_breaker_open", connector=sink.name) == 1
            log = daemon.log()
            assert any(
                "notify critical" in line and sink.name in line and "likely configuration" in line
                for line in log.splitlines()
            ), log[-4000:]
            time.sleep(3)  # nothing more is skipped
            assert quarantined_offsets(setup, sink) in ([], [0])
            assert task_states(connect, sink.name) == ["FAILED"]
            assert sink.lines() == []
        finally:
            cleanup(connect, sink)


def _consumer_assigned(west: str, group: str) -> bool:
    """The sink's consumer has joined its group and holds a partition (its start is fixed)."""
    admin = AdminClient({"bootstrap.servers": west})
    found = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return any(m.assignment.topic_partitions for m in found.members)


def test_a_new_sink_whose_first_record_is_bad_is_healed_from_where_its_consumer_starts(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """No DLQ, nothing committed. `earliest`: the bad record is the log's first. `latest`:
    three old records come before the sink and must never be delivered; the bad record and ten
    good ones come after its consumer started."""
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=REMEDIATION) as setup:
        quick_shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        first = Sink(f"{setup.prefix}-first", unique(f"{setup.prefix}-f"), tmp_path / "f.txt")
        latest = Sink(f"{setup.prefix}-latest", unique(f"{setup.prefix}-l"), tmp_path / "l.txt")
        for sink in (first, latest):
            create_topic(setup.west, sink.topic)
        produce(setup.west, first.topic, [POISON, *good(range(10))])
        produce(setup.west, latest.topic, good(range(100, 103)))
        try:
            setup.start()
            connect.create(
                latest.name,
                json_file_sink(
                    latest.topic,
                    latest.out,
                    **{"errors.tolerance": "none", "consumer.override.auto.offset.reset": "latest"},
                ),
            )
            connect.wait_running(latest.name)
            wait_for(
                f"{latest.name}'s consumer assigned",
                lambda: _consumer_assigned(setup.west, f"connect-{latest.name}"),
            )
            time.sleep(1)
            assert produce(setup.west, latest.topic, [POISON, *good(range(10))])[0] == 3
            connect.create(
                first.name, json_file_sink(first.topic, first.out, **{"errors.tolerance": "none"})
            )
            for sink, poison in ((first, 0), (latest, 3)):
                done = wait_run(setup, sink.name)
                assert done["outcome"] == "executed", done
                assert done["record"]["offset"] == poison, done
                if sink is first:
                    assert "auto.offset.reset=earliest: the log start, 0" in done["located"], done
                else:  # the restart rule pinned it first, saying so; locating found the pin
                    assert "3 is where its consumer started, pinned" in done["located"], done
                wait_for(
                    f"{sink.name} to deliver the good records",
                    lambda s=sink: len(s.lines()) >= 10,  # type: ignore[misc]
                    timeout_s=60,
                )
                time.sleep(2)
                assert delivered(sink) == list(range(10)), sink.name
                assert quarantined_offsets(setup, sink) == [poison]
                assert committed(connect, sink.name) == poison + 11
                assert task_states(connect, sink.name) == ["RUNNING"]
                assert MAX_POLL_RECORDS_KEY not in config_of(connect, sink.name)
            restarts = [
                r
                for r in setup.outcomes(latest.name)
                if r["rule"] == "poison-record-restart" and r["outcome"] == "executed"
            ]
            pins = [r["pinned"] for r in restarts if "pinned" in r]
            assert len(pins) == 1, restarts
            assert f"{latest.topic}-0 at 3 (auto.offset.reset=latest" in pins[0], pins
        finally:
            cleanup(connect, first, latest)
