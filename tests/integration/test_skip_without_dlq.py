"""A poison record in the middle of a batch, in a sink WITHOUT a DLQ, skipped by `offsetd run`.

Why this test exists: without a DLQ nothing names the failing record. The group's committed
offset C is only the start of the batch the task dropped, so a skip to C+1 would lose the good
records between C and the poison record N and might still keep N. The daemon has to locate N
itself (one-record batches: `consumer.override.max.poll.records=1`, restart, fail again, then the
committed offset is N), put the connector's config back exactly, and only then run the skip
saga. test_guardrails always puts the poison record first in its batch and names it through a
DLQ; test_locate calls `locate` directly. This one runs the whole chain in a real daemon: the
FAILED task status fires a rule, the executor locates, quarantines, stops, patches, resumes and
verifies, and every good record reaches the sink exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from offsetd.cli import main
from offsetd.devstack.stack import StackInfo
from offsetd.events.models import RecordRef
from offsetd.remediation.locate import MAX_POLL_RECORDS_KEY
from offsetd.remediation.sagas import STEPS, SagaRecord, SagaStore, locate_key, skip_key
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
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
    task_states,
    wait_committed,
    wait_failed,
)

pytestmark = pytest.mark.integration
RULE = "skip-at-failed-task"
CONNECT_CLUSTER = "local"  # the stack's Connect cluster in offsetd.yaml


def write_status_rule(folder: Path, prefix: str) -> None:
    """Make this daemon's only rule: skip the record a task of `<prefix>-*` died on, once.

    daemon_setup's own rule (skip on a DLQ record) goes: this sink has no DLQ, and the test
    must show the FAILED task status alone is enough. Cooldown and budget let the rule act once;
    the task fails again while the record is located, and those failures must not act again.
    """
    for old in folder.glob("*.yaml"):
        old.unlink()
    rule = {
        "name": RULE,
        "description": "Skip the poison record a sink task without a DLQ died on.",
        "mode": "enforce",
        "match": {"kind": "task_status", "state": "FAILED", "connector": f"{prefix}-*"},
        "when": {"count": 1, "within": "10m"},
        "actions": [{"type": "skip-record"}],
        "limits": {"budget": {"max": 1, "per": "1h"}, "cooldown": "10m"},
    }
    with (folder / f"{RULE}.yaml").open("w") as out:
        YAML().dump(rule, out)
    checked = CliRunner().invoke(main, ["rules", "check", str(folder)])
    assert checked.exit_code == 0, checked.output
    assert "ok: 1 rule in 1 file" in checked.output


def config_of(connect: ConnectClient, name: str) -> dict[str, str]:
    response = connect.http.get(connect.path(name, "/config"))
    assert response.status_code == 200, response.text
    result: dict[str, str] = response.json()
    return result


def sagas_of(setup: Setup, connector: str) -> list[SagaRecord]:
    """Every saga record of `connector` in the daemon's sagas topic (the latest of each key)."""
    store = SagaStore({"bootstrap.servers": setup.west}, setup.remediation["sagas_topic"])
    store.start()
    try:
        return [r for r in store.all() if r.connector == connector]
    finally:
        store.close()


def offsets_in(entries: list[dict[str, Any]]) -> list[int]:
    return [int(e["offset"]["kafka_offset"]) for e in entries]


def test_a_poison_record_mid_batch_without_a_dlq_is_located_quarantined_and_skipped(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    # Other tests may leave failed connectors on a shared stack: the blast radius is not the
    # subject here.
    remediation = {"blast_radius": {"max_failing_connectors": 1000}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        write_status_rule(Path(setup.data["daemon"]["rules_dir"]), setup.prefix)
        topic = unique(f"{setup.prefix}-topic")
        create_topic(setup.west, topic)
        assert produce(setup.west, topic, good(range(3))) == [0, 1, 2]
        name = f"{setup.prefix}-sink"
        sink = Sink(name, topic, tmp_path / f"{name}.txt")
        connect.create(name, json_file_sink(topic, sink.out, **{"errors.tolerance": "none"}))
        try:
            connect.wait_running(name)
            original = config_of(connect, name)
            assert not any(k.startswith("errors.deadletterqueue") for k in original), original
            assert MAX_POLL_RECORDS_KEY not in original
            wait_committed(connect, sink, 3)

            # One produce call: one producer batch, one poll, good records on both sides.
            offsets = produce(setup.west, topic, [*good([3, 4]), POISON, *good([6, 7, 8])])
            assert offsets == [3, 4, 5, 6, 7, 8]
            poison = offsets[2]
            wait_failed(connect, sink)
            # Before the daemon runs: the group points at the batch start, not at the poison
            # record, and the good records 3 and 4 of the failed batch were never delivered.
            assert committed(connect, name) == 3 < poison
            assert sink.lines() == [f"{{n={i}}}" for i in range(3)]

            daemon = setup.start()
            done = setup.wait_outcome(name, "executed")
            assert done["rule"] == RULE
            assert done["saga_status"] == "done", done
            assert done["located_by"] == "single_record_batches"
            assert "one-record batches" in done["located"], done["located"]
            assert done["record"] == {"topic": topic, "partition": 0, "offset": poison}
            # The skip saga moved the group from N to N+1 (not from the batch start).
            assert offsets_in(done["before"]) == [poison]
            assert offsets_in(done["after"]) == [poison + 1]
            assert [s["step"] for s in done["steps"] if s["step"] in STEPS] == list(STEPS)
            calls = [
                (c["method"], c["path"].rsplit("/", 1)[-1], c["status"]) for c in done["http_calls"]
            ]
            # Locating first: the one-record override written, the failed task restarted, the
            # original config put back; only then stop, patch and resume. Counted: the writes
            # Connect accepted (a restart sent during the rebalance that follows the config
            # change is answered 409, or 500 "a rebalance is expected", and retried by the
            # client; seen in CI).
            order = [("PUT", "config"), ("POST", "restart"), ("PUT", "config")]
            order += [("PUT", "stop"), ("PATCH", "offsets"), ("PUT", "resume")]
            writes = [
                (method, last)
                for method, last, status in calls
                if method != "GET" and last != "validate" and status < 400
            ]
            assert writes == order, calls
            refused = [(m, last, s) for m, last, s in calls if s >= 400]
            assert all(s in (409, 500) for _m, _l, s in refused), refused  # rebalance answers

            # How the record was found is in the saga record too.
            sagas = sagas_of(setup, name)
            skips = [s for s in sagas if s.kind == "skip"]
            assert [s.key for s in skips] == [skip_key(CONNECT_CLUSTER, name, topic, 0, poison)]
            assert skips[0].located_by == "single_record_batches"
            assert skips[0].status == "done"
            assert skips[0].completed == STEPS
            located = [s for s in sagas if s.kind == "locate"]
            assert [s.key for s in located] == [locate_key(CONNECT_CLUSTER, name)]
            assert located[0].status == "done"
            assert located[0].override == {"original": None}  # the sink had no override

            # Exactly one record in quarantine, and it is the poison record, whole.
            copies = setup.quarantined()
            assert len(copies) == 1, copies
            assert copies[0].original == RecordRef(topic=topic, partition=0, offset=poison)
            assert (copies[0].stored.key, copies[0].stored.value) == POISON
            assert copies[0].connector == name

            # Every good record, once, in order: 3 and 4 (between the batch start and the
            # poison record) and everything after it.
            expected = [f"{{n={i}}}" for i in (0, 1, 2, 3, 4, 6, 7, 8)]
            wait_for("every good record in the sink", lambda: len(sink.lines()) >= len(expected))
            assert sink.lines() == expected
            wait_committed(connect, sink, offsets[-1] + 1)
            assert sink.lines() == expected  # nothing delivered twice after the commit either
            status = connect.status(name)
            assert status is not None
            assert status["connector"]["state"] == "RUNNING"
            assert task_states(connect, name) == ["RUNNING"]
            assert config_of(connect, name) == original

            # The task's own failures while it was located fire the rule again: they must be
            # held back (cooldown), not act a second time.
            outcomes = [r["outcome"] for r in setup.outcomes(name)]
            assert outcomes == ["executed"], outcomes
            held_back = setup.tallies(name, RULE)
            assert {t["outcome"] for t in held_back} <= {"suppressed_cooldown"}, held_back
            assert (
                daemon.metric("offsetd_remediation_outcomes_total", rule=RULE, outcome="executed")
                == 1
            )
            assert daemon.metric("offsetd_records_skipped_total", connector=name) == 1
            assert daemon.metric("offsetd_records_quarantined_total", connector=name) == 1
            assert daemon.metric("offsetd_connector_left_stopped", connector=name) == 0
        finally:
            cleanup(connect, sink)
