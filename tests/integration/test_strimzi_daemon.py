"""`offsetd run` heals Strimzi-managed sinks with the shipped rules, through their resources.

The field's timing as in `test_heal_in_the_field` (a poison record mid-batch; with a DLQ the
decision comes before FAILED) but for the restart rule's backoff, shortened through its own
settings (`shorten_restart_backoff`: the real one is proven once, there), on sinks described by
KafkaConnectors, while the stand-in
operator reconciles every 5 s: the restart rule restarts through `strimzi.io/restart-task`,
locating with one-record batches changes `spec.config` (a REST change would be put back) and
restores it exactly, and the skip stops, writes and resumes through the resource; each skip
leaves its Kubernetes Event on the KafkaConnector.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from lightkube.resources.events_v1 import Event
from ruamel.yaml import YAML

from offsetd.devstack.stack import StackInfo
from offsetd.offsets.strimzi.backend import PRIOR_STATES
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_guardrails import (
    POISON,
    Sink,
    daemon_setup,
    good,
    ours,
    wait_committed,
    wait_failed,
)
from tests.integration.test_heal_in_the_field import assert_healed, quick_shipped_rules, wait_skip
from tests.integration.test_skip_without_dlq import config_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_the_daemon_skips_a_poison_record_in_strimzi_managed_sinks_through_the_resources(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path, strimzi_ns: Any
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=5.0)
    access = YAML(typ="safe").load(ns.config.read_text())["connect_clusters"]["local"]["strimzi"]
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(
        stack, tmp_path, mode="enforce", remediation=remediation, strimzi=access
    ) as setup:
        quick_shipped_rules(Path(setup.data["daemon"]["rules_dir"]))
        sinks: list[Sink] = []
        specs: dict[str, dict[str, Any]] = {}
        for suffix, with_dlq in (("dlq", True), ("nodlq", False)):
            topic = unique(f"{setup.prefix}-{suffix}")
            create_topic(setup.west, topic)
            produce(setup.west, topic, good(range(3)))
            name = f"{setup.prefix}-{suffix}".lower()
            out = tmp_path / f"{name}.txt"
            config = (
                dlq_json_file_sink(topic, out, setup.dlq)
                if with_dlq
                else json_file_sink(topic, out, **{"errors.tolerance": "none"})
            )
            ns.connector(name, config)
            connect.wait_running(name)
            sinks.append(Sink(name, topic, out))
            specs[name] = ns.get("KafkaConnector", name)["spec"]
        originals = {s.name: config_of(connect, s.name) for s in sinks}
        for sink in sinks:
            wait_committed(connect, sink, 3)
        setup.start()
        poison = {}
        for sink in sinks:
            offsets = produce(setup.west, sink.topic, [*good(range(3, 33)), POISON])
            offsets += produce(setup.west, sink.topic, good(range(33, 63)))
            poison[sink.name] = offsets[30]
        for sink in sinks:
            wait_failed(connect, sink)
        for sink, rule in zip(
            sinks, ("poison-record-skip", "poison-record-skip-located"), strict=True
        ):
            done = wait_skip(setup, sink.name, timeout_s=400)
            assert done["rule"] == rule, done
            assert done["record"]["offset"] == poison[sink.name]
            assert done["located_by"] == "single_record_batches", done  # spec.config, restored
        for sink in sinks:
            assert_healed(connect, sink, originals[sink.name])
            doc = ns.get("KafkaConnector", sink.name)
            spec = {
                k: v for k, v in doc["spec"].items() if k not in ("alterOffsets", "listOffsets")
            }
            assert spec == specs[sink.name]  # spec.config and spec.state exactly as before
            notes = doc["metadata"].get("annotations") or {}
            assert not {PRIOR_STATES, "strimzi.io/connector-offsets"} & set(notes), notes
        kept = ours(setup, setup.quarantined())
        assert sorted(
            (q.connector, q.original.offset if q.original else None) for q in kept
        ) == sorted((s.name, poison[s.name]) for s in sinks)
        # offsetd moved nothing through REST: every Connect call it made for these sinks was a
        # read or a config validation (stops, the config change, restarts and offsets went
        # through the resource).
        moving = [
            (c["method"], c["path"])
            for r in setup.audit()
            if r.get("connector") in {s.name for s in sinks}
            for c in r.get("http_calls") or []
            if c["method"] != "GET" and not c["path"].endswith("/config/validate")
        ]
        assert moving == [], moving
        assert any(
            r.get("http_calls") for r in setup.audit() if r.get("connector") == sinks[0].name
        )
        time.sleep(3)
        for sink in sinks:
            skips = [
                r
                for r in setup.outcomes(sink.name)
                if any(a["type"] == "skip-record" for a in r["actions"])
                and r["outcome"] == "executed"
            ]
            assert len(skips) == 1, skips
    # `offsetd run`'s own path (the faust worker) left one RecordSkipped Event on each
    # KafkaConnector, written with the shipped Role's token
    for sink in sinks:
        [event] = wait_for(
            f"the RecordSkipped Event of {sink.name}", partial(_skipped_events, ns, sink.name), 30
        )
        uid = ns.get("KafkaConnector", sink.name)["metadata"]["uid"]
        assert event.regarding is not None
        assert event.regarding.uid == uid
        assert f"record {sink.topic}/0@{poison[sink.name]}" in (event.note or "")
        assert event.series is None


def _skipped_events(ns: StrimziNamespace, name: str) -> list[Event]:
    return [
        e
        for e in ns.admin.list(Event, namespace=ns.namespace)
        if e.regarding is not None and e.regarding.name == name and e.reason == "RecordSkipped"
    ]
