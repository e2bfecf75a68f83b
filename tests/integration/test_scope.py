"""Two offsetd deployments on one Connect cluster, each acting only on the connectors it owns.

Teams share Connect clusters. Before scopes, the only way to keep a deployment's hands off a
connector was `opt_out`: two deployments watching one cluster both decided on, audited, and
remediated every connector. Here two real `offsetd run` daemons (own app ids, audit, control,
sagas and quarantine topics, as two teams' deployments have) read the same Connect cluster and
the same DLQ, and both run a skip rule that matches both teams' sinks. Only their scopes differ:

- team A: `connect_clusters.local.scope.connectors` = a glob of its sinks' names;
- team B: `remediation.scope.labels` = `team=<b>`, which its sink carries as the connector config
  entry `offsetd.label.team` (Connect keeps the unknown key; this test shows it does on a
  FileStreamSink). Team A's sink carries another team's label, which must not admit it.

Each sink gets a poison record. Each daemon must heal its own sink (quarantine copy, offset
past the record, every good record delivered) and nothing else: its audit holds only its own
connector, its quarantine only its own record, and through its own FaultProxy it made no REST
call at all to the other team's connector. The records it dropped are counted. Then a second
poison record in each sink, with both daemons already running, takes the live path too.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.faultproxy import FaultProxy
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.test_guardrails import (
    POISON,
    WRITING_METHODS,
    Setup,
    Sink,
    cleanup,
    committed,
    daemon_setup,
    good,
    task_states,
    wait_committed,
    wait_failed,
    write_rule,
)

pytestmark = pytest.mark.integration


def labelled_poisoned_sink(
    connect: ConnectClient, setup: Setup, name: str, dlq: str, labels: dict[str, str]
) -> tuple[Sink, int]:
    """`poisoned_sink` with `offsetd.label.*` entries in the connector config: 3 good records
    committed, then POISON and 2 good ones; returns the sink and the poison record's offset."""
    topic = unique(f"{name}-topic")
    create_topic(setup.west, topic)
    produce(setup.west, topic, good(range(3)))
    out = setup.tmp / f"{name}.txt"
    extra = {f"offsetd.label.{key}": value for key, value in labels.items()}
    connect.create(name, dlq_json_file_sink(topic, out, dlq, **extra))
    connect.wait_running(name)
    sink = Sink(name, topic, out)
    wait_committed(connect, sink, 3)
    return sink, produce(setup.west, topic, [POISON, *good(range(4, 6))])[0]


def unowned_failing_sink(
    connect: ConnectClient, setup: Setup, name: str, dlq: str, labels: dict[str, str]
) -> Sink:
    """A labelled sink whose topic starts with POISON: it fails on its first batch, seconds
    after it is created."""
    topic = unique(f"{name}-topic")
    create_topic(setup.west, topic)
    produce(setup.west, topic, [POISON, *good([1])])
    out = setup.tmp / f"{name}.txt"
    extra = {f"offsetd.label.{key}": value for key, value in labels.items()}
    connect.create(name, dlq_json_file_sink(topic, out, dlq, **extra))
    return Sink(name, topic, out)


def rewrite(setup: Setup) -> None:
    with setup.config.open("w") as out:
        YAML().dump(setup.data, out)


def wait_executed(setup: Setup, sink: Sink, count: int) -> None:
    """Wait for `count` executed outcomes of `sink`; on timeout, say what happened instead."""
    try:
        wait_for(
            f"{count} executed skips of {sink.name}",
            lambda: [r["outcome"] for r in setup.outcomes(sink.name)].count("executed") >= count,
            timeout_s=120,
        )
    except AssertionError as timed_out:
        seen = [(r.get("outcome"), r.get("message")) for r in setup.outcomes(sink.name)]
        log = setup.daemon.log()[-6000:] if setup.daemon is not None else ""
        raise AssertionError(f"{timed_out}\noutcomes: {seen}\ndaemon log:\n{log}") from None


def audited_connectors(setup: Setup) -> set[Any]:
    """Every connector the daemon's audit names: decisions and remediation outcomes."""
    return {record.get("connector") for record in setup.audit()}


def test_two_deployments_on_one_connect_cluster_each_act_only_on_their_own(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    upstream = str(connect.http.base_url)
    with ExitStack() as stack_of:
        proxy_a = stack_of.enter_context(FaultProxy(upstream))
        proxy_b = stack_of.enter_context(FaultProxy(upstream))
        team_a = stack_of.enter_context(
            daemon_setup(stack, tmp_path / "a", mode="enforce", connect_url=proxy_a.url)
        )
        team_b = stack_of.enter_context(
            daemon_setup(stack, tmp_path / "b", mode="enforce", connect_url=proxy_b.url)
        )
        prefix, dlq = team_a.prefix, team_a.dlq
        label_a, label_b = unique("team-a"), unique("team-b")
        # Without scopes both daemons would act on both sinks: one DLQ, one rule for both
        # (guard-skip on `<prefix>-*`), and no breaker between the two poison records.
        write_rule(team_b.tmp / "rules", prefix, "enforce")
        for setup in (team_a, team_b):
            setup.data["connect_clusters"]["local"]["dlq_topics"] = [dlq]
            setup.remediation["breaker_window"] = "0s"
            # four failing sinks here, more elsewhere on the stack: not what this test is about
            setup.remediation["blast_radius"] = {"max_failing_connectors": 1000}
        team_a.data["connect_clusters"]["local"]["scope"] = {"connectors": [f"{prefix}-a-*"]}
        team_b.remediation["scope"] = {"labels": [f"team={label_b}"]}
        rewrite(team_a)
        rewrite(team_b)

        sink_a, poison_a = labelled_poisoned_sink(
            connect, team_a, f"{prefix}-a-sink", dlq, {"team": label_a}
        )
        stack_of.callback(cleanup, connect, sink_a)
        sink_b, poison_b = labelled_poisoned_sink(
            connect, team_b, f"{prefix}-b-sink", dlq, {"team": label_b}
        )
        stack_of.callback(cleanup, connect, sink_b)
        wait_failed(connect, sink_a)
        wait_failed(connect, sink_b)
        # Connect keeps the label as an ordinary config entry, and the sink ran with it.
        config_b = connect.http.get(f"/connectors/{sink_b.name}/config").json()
        assert config_b["offsetd.label.team"] == label_b

        daemon_a, daemon_b = team_a.start(), team_b.start()
        done_a = team_a.wait_outcome(sink_a.name, "executed")
        done_b = team_b.wait_outcome(sink_b.name, "executed")
        assert done_a["record"] == {"topic": sink_a.topic, "partition": 0, "offset": poison_a}
        assert done_b["record"] == {"topic": sink_b.topic, "partition": 0, "offset": poison_b}
        for sink in (sink_a, sink_b):
            wait_for(f"{sink.name}'s good records", lambda: len(sink.lines()) == 5)  # noqa: B023
            assert sink.lines() == [f"{{n={i}}}" for i in (0, 1, 2, 4, 5)]

        # Connectors nobody here owns (not team A's names, team A's label), created while both
        # daemons run and failing on their first record: new to both, and for team B's
        # label scope, failing before or just as their metadata is read (two created back to
        # back: the second's status change comes within the cache's rate limit).
        unowned = [
            unowned_failing_sink(connect, team_a, f"{prefix}-{c}-sink", dlq, {"team": label_a})
            for c in ("c", "d")
        ]
        for sink in unowned:
            stack_of.callback(cleanup, connect, sink)
        for sink in unowned:
            wait_failed(connect, sink)

        # The live path: a second poison record in each sink while both daemons run (after
        # the unowned sinks' DLQ records in the one DLQ partition, so those were read first).
        second_a = produce(team_a.west, sink_a.topic, [POISON, *good([7])])[0]
        second_b = produce(team_b.west, sink_b.topic, [POISON, *good([7])])[0]
        wait_executed(team_a, sink_a, 2)
        wait_executed(team_b, sink_b, 2)
        wait_committed(connect, sink_a, second_a + 2)
        wait_committed(connect, sink_b, second_b + 2)

        # Each audit holds its own connector only: the other's events were never decided.
        assert audited_connectors(team_a) == {sink_a.name}
        assert audited_connectors(team_b) == {sink_b.name}
        assert [r["outcome"] for r in team_a.outcomes(sink_a.name)] == ["executed", "executed"]
        assert [r["outcome"] for r in team_b.outcomes(sink_b.name)] == ["executed", "executed"]
        # Each quarantined exactly its own two records, once each.
        for setup, sink, offsets in (
            (team_a, sink_a, [poison_a, second_a]),
            (team_b, sink_b, [poison_b, second_b]),
        ):
            copies = [q for q in setup.quarantined() if (q.connector or "").startswith(prefix)]
            assert [(c.connector, c.original.offset if c.original else None) for c in copies] == [
                (sink.name, offset) for offset in offsets
            ]
            assert (committed(connect, sink.name) or 0) >= offsets[-1] + 2
        # Not one REST call of either daemon named the other team's connector, and none wrote
        # to the unowned ones (reading one to learn its labels is what a label scope does).
        for proxy, other in ((proxy_a, sink_b.name), (proxy_b, sink_a.name)):
            touched = [(c.method, c.path) for c in proxy.calls if other in c.path]
            assert touched == [], touched
            assert any(c.method == "PATCH" for c in proxy.calls)  # and each did act
            written = [
                (c.method, c.path)
                for c in proxy.calls
                if c.method in WRITING_METHODS and any(u.name in c.path for u in unowned)
            ]
            assert written == [], written
        for sink in unowned:
            assert task_states(connect, sink.name) == ["FAILED"]  # left alone by both
        # The other team's records were dropped before the rules, and counted.
        for daemon in (daemon_a, daemon_b):
            assert daemon.metric("offsetd_out_of_scope_records_total", connect_cluster="local") > 0
        assert f"acting on connectors {prefix}-a-* (connect_clusters.local.scope)" in (
            daemon_a.log()
        )
        assert f"acting on labels team={label_b} (remediation.scope)" in daemon_b.log()
