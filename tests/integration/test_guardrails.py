"""The guardrails end to end: a real `offsetd run` against real sink connectors and poison records.

Each test starts its own daemon (own app id, audit, control, sagas and quarantine topics) with a
rule of its own that matches only that test's connectors, so nothing another test left on the
shared stack can fire it. The rule skips on the first DLQ record (count 1, no cooldown, a large
rule budget): the engine's own limits stay out of the way and only the remediation guards can
hold a skip back. The poison record is always the first record of the failed batch (the good
records before it are committed first), so the DLQ names it and no one-record-batch locating is
needed: that keeps each scenario to what it is about, and fast.

What each asserts, besides the audit outcome and the guard that decided: the REST calls (through
a FaultProxy where "no writing call" must be proven), the outcome metrics of the daemon's own
/metrics page, the quarantine topic, and the sink's committed offsets.

About 3 minutes in one lane: each test starts its own daemon (~5 s) and waits for one real skip
or hold; approve mode also waits across a daemon restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from ruamel.yaml import YAML

from offsetd.audit import read_records
from offsetd.cli import main
from offsetd.devstack.faultproxy import CLOSE, FaultProxy
from offsetd.devstack.stack import StackInfo
from offsetd.remediation.guards import count_failing
from offsetd.remediation.quarantine import read_quarantined
from offsetd.remediation.quarantine_format import QuarantinedRecord
from tests.integration.daemonproc import Daemon, free_port
from tests.integration.kafkautil import (
    ConnectClient,
    consume_all,
    create_topic,
    dlq_json_file_sink,
    headers_of,
    produce,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
WRITING_METHODS = {"PUT", "POST", "PATCH", "DELETE"}


@dataclass
class Setup:
    """One test's daemon: its config (as data and file), its topics and its connector prefix."""

    stack: StackInfo
    tmp: Path
    prefix: str
    dlq: str
    data: dict[str, Any]
    config: Path
    daemon: Daemon | None = None

    @property
    def west(self) -> str:
        return str(self.stack.clusters["west"]["bootstrap.servers"])

    @property
    def remediation(self) -> dict[str, Any]:
        result: dict[str, Any] = self.data["remediation"]
        return result

    def start(
        self,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
    ) -> Daemon:
        self.daemon = Daemon(
            self.config,
            self.tmp / "daemon.log",
            self.data["daemon"]["web_port"],
            args=args,
            env=env,
            wrap=wrap,
        )
        self.daemon.start()
        return self.daemon

    def audit(self) -> list[dict[str, Any]]:
        return read_records({"bootstrap.servers": self.west}, self.data["daemon"]["audit_topic"])

    def outcomes(self, connector: str) -> list[dict[str, Any]]:
        """The remediation outcomes of one connector, in the order they were written."""
        return [
            r
            for r in self.audit()
            if r.get("kind") == "remediation" and r.get("connector") == connector
        ]

    def tallies(self, connector: str, rule: str | None = None) -> list[dict[str, Any]]:
        """The tallies of one connector's suppressed decisions (offsetd.engine.tally)."""
        return [
            r
            for r in self.audit()
            if r.get("kind") == "suppressed"
            and r.get("connector") == connector
            and (rule is None or r.get("rule") == rule)
        ]

    def wait_outcome(self, connector: str, outcome: str, timeout_s: float = 120) -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def probe() -> dict[str, Any] | None:
            self._alive()
            seen[:] = self.outcomes(connector)
            found = [r for r in seen if r["outcome"] == outcome]
            return found[0] if found else None

        try:
            return wait_for(f"{connector}: outcome {outcome}", probe, timeout_s)
        except AssertionError as timed_out:
            # What the daemon did instead, so that a failure in CI can be read without a rerun.
            others = [(r.get("outcome"), r.get("guard"), r.get("message")) for r in seen]
            log = self.daemon.log()[-6000:] if self.daemon is not None else ""
            raise AssertionError(f"{timed_out}\noutcomes: {others}\ndaemon log:\n{log}") from None

    def quarantined(self) -> list[QuarantinedRecord]:
        return read_quarantined(
            {"bootstrap.servers": self.west}, self.remediation["quarantine_topic"]
        )

    def cli(self, *words: str) -> Result:
        """`offsetd <command...> --config <config> <options...>` in-process."""
        args = list(words)
        split = next((i for i, w in enumerate(args) if w.startswith("-")), len(args))
        return CliRunner().invoke(
            main, [*args[:split], "--config", str(self.config), *args[split:]]
        )

    def _alive(self) -> None:
        daemon = self.daemon
        if daemon is not None and daemon.proc is not None and daemon.proc.poll() is not None:
            raise AssertionError(f"offsetd run exited: {daemon.log()[-3000:]}")


def write_rule(folder: Path, prefix: str, mode: str) -> None:
    """Skip on the first DLQ record of a connector named `<prefix>-*`; engine limits off."""
    folder.mkdir(parents=True, exist_ok=True)
    rule = {
        "name": "guard-skip",
        "description": "Skip a poison record in this test's sinks at its first failure.",
        "mode": mode,
        "match": {"kind": "dlq_record", "connector": f"{prefix}-*"},
        "when": {"count": 1, "within": "10m", "key": ["connector", "record"]},
        "actions": [{"type": "skip-record"}],
        "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
    }
    with (folder / "guard-skip.yaml").open("w") as out:
        YAML().dump(rule, out)


@contextmanager
def daemon_setup(
    stack: StackInfo,
    tmp: Path,
    *,
    mode: str,
    remediation: dict[str, Any] | None = None,
    connect_url: str | None = None,
    strimzi: dict[str, Any] | None = None,
) -> Iterator[Setup]:
    """Config, rule and topics for one daemon; the daemon is stopped (by PID) at the end."""
    prefix, dlq = unique("guard"), unique("guard-dlq")
    data = stack.offsetd_config()
    local = data["connect_clusters"]["local"]
    local["dlq_topics"] = [dlq]
    if connect_url is not None:
        local["url"] = connect_url
    if strimzi is not None:
        local["strimzi"] = strimzi
    data["daemon"] = {
        "app_id": unique("offsetd-guard"),
        "partitions": 2,
        "rules_dir": str(tmp / "rules"),
        "audit_topic": unique("offsetd.audit"),
        "web_port": free_port(),
        "data_dir": str(tmp / "state"),
    }
    data["remediation"] = {
        "sagas_topic": unique("offsetd.sagas"),
        "control_topic": unique("offsetd.control"),
        "quarantine_topic": unique("offsetd.quarantine"),
        "verify_stable_for": "2s",
        "stop_timeout": "60s",
        "resume_timeout": "60s",
        **(remediation or {}),
    }
    write_rule(tmp / "rules", prefix, mode)
    config = tmp / "offsetd.yaml"
    with config.open("w") as out:
        YAML().dump(data, out)
    create_topic(str(stack.clusters["west"]["bootstrap.servers"]), dlq)
    setup = Setup(stack, tmp, prefix, dlq, data, config)
    try:
        yield setup
    finally:
        if setup.daemon is not None:
            setup.daemon.stop()


# -- poisoned sinks -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Sink:
    name: str
    topic: str
    out: Path

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines() if self.out.exists() else []


def good(numbers: range | list[int]) -> list[tuple[bytes, bytes]]:
    return [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in numbers]


POISON = (b"bad", b"{not json")


def committed(connect: ConnectClient, name: str) -> int | None:
    """The sink's next offset on partition 0 of its topic (None: nothing committed)."""
    entries = connect.offsets(name)["offsets"]
    return int(entries[0]["offset"]["kafka_offset"]) if entries else None


def task_states(connect: ConnectClient, name: str) -> list[str]:
    status = connect.status(name)
    return [t["state"] for t in status["tasks"]] if status else []


def start_sink(connect: ConnectClient, setup: Setup, suffix: str, topic: str) -> Sink:
    """A JSON FileStreamSink with a DLQ and context headers (the recipe), RUNNING."""
    name = f"{setup.prefix}-{suffix}"
    out = setup.tmp / f"{name}.txt"
    connect.create(
        name,
        dlq_json_file_sink(topic, out, setup.dlq),
    )
    connect.wait_running(name)
    return Sink(name, topic, out)


def wait_committed(connect: ConnectClient, sink: Sink, offset: int) -> None:
    wait_for(
        f"{sink.name} to commit {offset}",
        lambda: committed(connect, sink.name) == offset,
        timeout_s=60,
    )


def wait_failed(connect: ConnectClient, sink: Sink) -> None:
    wait_for(
        f"{sink.name} to fail", lambda: task_states(connect, sink.name) == ["FAILED"], timeout_s=60
    )


def poisoned_sink(
    connect: ConnectClient, setup: Setup, after: list[tuple[bytes, bytes]], suffix: str = "sink"
) -> tuple[Sink, int]:
    """A sink that delivered 3 good records, committed them, then got POISON followed by `after`.

    Returns the sink and the poison record's offset. The poison record is the first of the
    batch that fails, so the committed offset is the poison offset when the task fails.
    """
    topic = unique(f"{setup.prefix}-topic")
    create_topic(setup.west, topic)
    produce(setup.west, topic, good(range(3)))
    sink = start_sink(connect, setup, suffix, topic)
    wait_committed(connect, sink, 3)
    offsets = produce(setup.west, topic, [POISON, *after])
    return sink, offsets[0]


def cleanup(connect: ConnectClient, *sinks: Sink) -> None:
    for sink in sinks:
        connect.delete(sink.name)


def ours(setup: Setup, records: list[QuarantinedRecord]) -> list[QuarantinedRecord]:
    return [q for q in records if q.connector is not None and q.connector.startswith(setup.prefix)]


def expect(condition_name: str, probe: Callable[[], bool], seconds: float) -> None:
    """`probe` must hold for `seconds` on end: the daemon waits, it does not act."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe(), f"{condition_name} no longer holds"
        time.sleep(0.5)


# -- the tests ----------------------------------------------------------------------------------


def test_observe_mode_makes_no_writing_call(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with (
        FaultProxy(str(connect.http.base_url)) as proxy,
        daemon_setup(stack, tmp_path, mode="observe", connect_url=proxy.url) as setup,
    ):
        sink, poison = poisoned_sink(connect, setup, good(range(4, 7)))
        try:
            daemon = setup.start()
            wait_failed(connect, sink)
            record = setup.wait_outcome(sink.name, "dry_run")
            assert record["guard"] == "mode"
            assert record["mode"] == "observe"
            assert record["would_be"] == "executed", record
            assert "observe mode: nothing was done" in record["message"]
            assert record["record"] == {"topic": sink.topic, "partition": 0, "offset": poison}
            assert "http_calls" not in record  # the writing path was never entered
            history = setup.cli("history", "--connector", sink.name, "-o", "json")
            assert history.exit_code == 0, history.output
            assert "dry_run" in [r.get("outcome") for r in json.loads(history.stdout)]
            assert (
                daemon.metric(
                    "offsetd_remediation_outcomes_total", rule="guard-skip", outcome="dry_run"
                )
                == 1
            )
            expect(
                "the sink stays FAILED", lambda: task_states(connect, sink.name) == ["FAILED"], 3
            )
            # The proof: the daemon reached Connect only through the proxy, and only read.
            calls = proxy.calls
            assert any(c.method == "GET" and c.path == "/connectors" for c in calls), calls
            written = [c for c in calls if c.method in WRITING_METHODS]
            assert written == [], written
            assert committed(connect, sink.name) == poison
            assert ours(setup, setup.quarantined()) == []
            assert daemon.metric("offsetd_connect_requests_total", method="PUT") == 0
        finally:
            cleanup(connect, sink)


def test_approve_mode_waits_across_a_restart_then_acts_after_offsetd_approve(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    with daemon_setup(stack, tmp_path, mode="approve") as setup:
        sink, poison = poisoned_sink(connect, setup, good(range(4, 7)))
        try:
            daemon = setup.start()
            waiting = setup.wait_outcome(sink.name, "awaiting_approval")
            assert waiting["guard"] == "approval"
            decision_id = waiting["decision_id"]
            assert f"offsetd approve {decision_id}" in waiting["message"]
            pending = setup.cli("approvals", "-o", "json")
            assert pending.exit_code == 0, pending.output
            assert [p["decision_id"] for p in json.loads(pending.stdout)] == [decision_id]
            # It waits: nothing moves while nobody has approved.
            expect(
                "the sink stays FAILED", lambda: task_states(connect, sink.name) == ["FAILED"], 3
            )
            assert committed(connect, sink.name) == poison
            assert ours(setup, setup.quarantined()) == []
            assert [r["outcome"] for r in setup.outcomes(sink.name)] == ["awaiting_approval"]
            # The wait outlives the daemon: the approval is in the control topic, and a new
            # daemon finds the decision that waits for it in the audit. (A restart, not a
            # SIGKILL: a killed member holds its partitions until its session times out.)
            daemon.stop()
            daemon = setup.start()
            expect(
                "the sink stays FAILED", lambda: task_states(connect, sink.name) == ["FAILED"], 2
            )

            approved = setup.cli("approve", decision_id, "--by", "alice")
            assert approved.exit_code == 0, approved.output
            done = setup.wait_outcome(sink.name, "executed")
            assert done["decision_id"] == decision_id
            assert done["guard"] == "approval"
            assert done["saga_status"] == "done"
            methods = [(c["method"], c["path"].rsplit("/", 1)[-1]) for c in done["http_calls"]]
            for call in (("PUT", "stop"), ("PATCH", "offsets"), ("PUT", "resume")):
                assert call in methods, methods
            assert [e["offset"]["kafka_offset"] for e in done["before"]] == [poison]
            assert [e["offset"]["kafka_offset"] for e in done["after"]] == [poison + 1]

            copies = ours(setup, setup.quarantined())
            assert len(copies) == 1
            assert copies[0].original is not None
            assert (copies[0].original.topic, copies[0].original.offset) == (sink.topic, poison)
            assert copies[0].stored.value == POISON[1]
            wait_for("all good records in the sink", lambda: len(sink.lines()) == 6)
            assert sink.lines() == [f"{{n={i}}}" for i in (0, 1, 2, 4, 5, 6)]
            assert (committed(connect, sink.name) or 0) >= poison + 1
            assert setup.cli("approvals", "-o", "json").stdout.strip() == "[]"
            assert [r["outcome"] for r in setup.outcomes(sink.name)] == [
                "awaiting_approval",
                "executed",
            ]
            executed = daemon.metric(
                "offsetd_remediation_outcomes_total", rule="guard-skip", outcome="executed"
            )
            assert executed == 1
            assert daemon.metric("offsetd_records_skipped_total", connector=sink.name) == 1
            assert daemon.metric("offsetd_records_quarantined_total", connector=sink.name) == 1
        finally:
            cleanup(connect, sink)


def test_a_skip_budget_of_one_stops_the_second_skip(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    # breaker_window 0s: a second failure after a skip must not open the breaker here, so
    # that the budget is the guard that holds the second skip back.
    remediation = {"skip_budget": {"max": 1, "per": "1h"}, "breaker_window": "0s"}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        sink, first = poisoned_sink(connect, setup, good(range(4, 6)))
        try:
            daemon = setup.start()
            done = setup.wait_outcome(sink.name, "executed")
            assert done["record"]["offset"] == first
            wait_committed(connect, sink, first + 3)
            second = produce(setup.west, sink.topic, [POISON, *good([7])])[0]
            held = setup.wait_outcome(sink.name, "suppressed_budget")
            assert held["guard"] == "skip_budget"
            assert held["record"]["offset"] == second
            assert "1 skips of" in held["message"]
            assert "skip_budget.max 1" in held["message"]
            expect(
                "the sink stays FAILED", lambda: task_states(connect, sink.name) == ["FAILED"], 3
            )
            assert committed(connect, sink.name) == second
            copies = ours(setup, setup.quarantined())
            assert [c.original.offset for c in copies if c.original] == [first]
            assert (
                daemon.metric(
                    "offsetd_remediation_outcomes_total",
                    rule="guard-skip",
                    outcome="suppressed_budget",
                )
                == 1
            )
            assert daemon.metric("offsetd_records_skipped_total", connector=sink.name) == 1
            # One outcome per decision: the first executed, the second held back.
            handled = [(r["decision_id"], r["outcome"]) for r in setup.outcomes(sink.name)]
            assert [o for _d, o in handled] == ["executed", "suppressed_budget"], handled
            assert handled[0][0] != handled[1][0]
            status = setup.cli("automation", "status", "-o", "json")
            assert status.exit_code == 0, status.output
            assert sink.name in status.stdout
        finally:
            cleanup(connect, sink)


def test_a_lost_answer_to_the_blast_radius_count_is_asked_again(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """The count fails closed when it cannot be read, and the decision comes only once: one
    dropped connection must not leave the sink FAILED for good."""
    with (
        FaultProxy(str(connect.http.base_url)) as proxy,
        daemon_setup(stack, tmp_path, mode="enforce", connect_url=proxy.url) as setup,
    ):
        proxy.inject("GET", r"^/connectors$", CLOSE, times=1, query_regex=r"^expand=status$")
        sink, poison = poisoned_sink(connect, setup, good(range(4, 6)))
        try:
            setup.start()
            done = setup.wait_outcome(sink.name, "executed")
            assert done["record"]["offset"] == poison
            counts = [
                (c.status, c.fault)
                for c in proxy.calls
                if c.path == "/connectors" and c.query == "expand=status"
            ]
            assert counts[:2] == [(None, "close"), (200, None)], counts
            wait_committed(connect, sink, poison + 3)
            assert [r["outcome"] for r in setup.outcomes(sink.name)] == ["executed"]
        finally:
            cleanup(connect, sink)


def test_a_restart_whose_connection_dropped_is_sent_again(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """restart-failed-tasks is idempotent (onlyFailed), so a request lost on its way is sent
    again instead of ending the decision as failed."""
    with (
        FaultProxy(str(connect.http.base_url)) as proxy,
        daemon_setup(stack, tmp_path, mode="enforce", connect_url=proxy.url) as setup,
    ):
        restart = {
            "name": "guard-restart",
            "description": "Restart this test's sinks once on their first failure.",
            "mode": "enforce",
            "match": {"kind": "dlq_record", "connector": f"{setup.prefix}-*"},
            "when": {"count": 1, "within": "10m", "key": ["connector", "record"]},
            "actions": [{"type": "restart-failed-tasks"}],
            "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "1h"},
        }
        with (tmp_path / "rules" / "guard-skip.yaml").open("w") as out:
            YAML().dump(restart, out)
        proxy.inject("POST", r"/restart$", CLOSE, times=1)
        sink, poison = poisoned_sink(connect, setup, good(range(4, 6)))
        try:
            setup.start()
            done = setup.wait_outcome(sink.name, "executed")
            assert done["rule"] == "guard-restart"
            restarts = [
                (c.status, c.fault)
                for c in proxy.calls
                if c.method == "POST" and c.path.endswith("/restart")
            ]
            assert restarts == [(None, "close"), (202, None)], restarts

            # The restarted task read the poison record again: a second DLQ record names it.
            def dlq_offsets() -> list[int] | None:
                found = [
                    int(headers_of(m)["__connect.errors.offset"])
                    for m in consume_all(setup.west, setup.dlq)
                ]
                return found if len(found) >= 2 else None

            offsets = wait_for("a second DLQ record", dlq_offsets)
            assert offsets == [poison, poison], offsets
        finally:
            cleanup(connect, sink)


def failing_connectors(connect: ConnectClient) -> int:
    """Connectors with the connector or a task FAILED on the stack now (what the guard counts)."""
    return count_failing(connect.http.get("/connectors", params={"expand": "status"}).json())


def test_three_sinks_failing_on_one_record_trip_a_blast_radius_of_two(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    # Other tests of the session may have left failed connectors on the shared stack: the
    # limit is 2 on top of those, so exactly our three failing sinks are one too many.
    already = failing_connectors(connect)
    remediation = {"blast_radius": {"max_failing_connectors": 2 + already}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        topic = unique(f"{setup.prefix}-topic")
        create_topic(setup.west, topic)
        produce(setup.west, topic, good(range(3)))
        sinks: list[Sink] = []
        try:
            for suffix in ("a", "b", "c"):
                sinks.append(start_sink(connect, setup, suffix, topic))
            for sink in sinks:
                wait_committed(connect, sink, 3)
            poison = produce(setup.west, topic, [POISON, *good([4])])[0]
            for sink in sinks:
                wait_failed(connect, sink)
            # Started once all three failed: each decision sees the outage whole.
            daemon = setup.start()
            for sink in sinks:
                held = setup.wait_outcome(sink.name, "suppressed_blast_radius")
                assert held["guard"] == "blast_radius"
                assert held["record"]["offset"] == poison
                failing = int(held["message"].split(" connectors failing")[0])
                assert failing >= 3 + already, held["message"]
                assert f"(limit {2 + already})" in held["message"]
            expect(
                "the sinks stay FAILED",
                lambda: all(task_states(connect, s.name) == ["FAILED"] for s in sinks),
                3,
            )
            for sink in sinks:
                assert committed(connect, sink.name) == poison
                assert [r["outcome"] for r in setup.outcomes(sink.name)] == [
                    "suppressed_blast_radius"
                ]
            assert ours(setup, setup.quarantined()) == []
            assert (
                daemon.metric(
                    "offsetd_remediation_outcomes_total",
                    rule="guard-skip",
                    outcome="suppressed_blast_radius",
                )
                == 3
            )
        finally:
            cleanup(connect, *sinks)


def move_back(connect: ConnectClient, sink: Sink, offset: int) -> None:
    """What undoes a skip behind offsetd's back (a person, a script, a connector that keeps its
    own offsets): stop the sink, set its offset back to `offset`, resume it."""
    assert connect.http.put(connect.path(sink.name, "/stop")).status_code == 204
    wait_for(
        f"{sink.name} STOPPED",
        lambda: (
            (s := connect.status(sink.name)) is not None
            and s["connector"]["state"] == "STOPPED"
            and not s["tasks"]
        ),
    )
    body = {
        "offsets": [
            {
                "partition": {"kafka_topic": sink.topic, "kafka_partition": 0},
                "offset": {"kafka_offset": offset},
            }
        ]
    }

    def patched() -> bool:  # a stopped sink's consumers may linger a moment (409/500)
        return connect.http.patch(connect.path(sink.name, "/offsets"), json=body).status_code == 200

    wait_for(f"{sink.name}'s offset set back to {offset}", patched, timeout_s=60)
    assert connect.http.put(connect.path(sink.name, "/resume")).status_code == 202


def test_a_failure_that_did_not_move_after_a_skip_opens_the_breaker(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """A skip of N heals the sink; then its offset is set back to N behind offsetd's back and it
    fails on N again: the failure did not move, the skip cannot help, the breaker opens and the
    record is not skipped (nor quarantined) a second time."""
    with daemon_setup(stack, tmp_path, mode="enforce") as setup:
        sink, first = poisoned_sink(connect, setup, good([5]))
        try:
            daemon = setup.start()
            skipped = setup.wait_outcome(sink.name, "executed")
            assert skipped["record"]["offset"] == first
            wait_committed(connect, sink, first + 2)
            move_back(connect, sink, first)
            held = setup.wait_outcome(sink.name, "breaker_open")
            assert held["guard"] == "breaker"
            assert held["record"]["offset"] == first
            assert f"offsetd breaker reset {sink.name}" in held["message"]
            breakers = setup.cli("breaker", "list", "-o", "json")
            assert breakers.exit_code == 0, breakers.output
            listed = json.loads(breakers.stdout)
            assert [b["connector"] for b in listed] == [sink.name]
            assert "the failure did not move" in json.dumps(listed), listed
            assert daemon.metric("offsetd_breaker_open", connector=sink.name) == 1
            assert (
                daemon.metric(
                    "offsetd_remediation_outcomes_total", rule="guard-skip", outcome="breaker_open"
                )
                == 1
            )
            # The record was skipped and kept once; the second failure was left alone.
            copies = ours(setup, setup.quarantined())
            assert [c.original.offset for c in copies if c.original] == [first]
            assert daemon.metric("offsetd_records_skipped_total", connector=sink.name) == 1
            expect(
                "the sink stays FAILED", lambda: task_states(connect, sink.name) == ["FAILED"], 3
            )
            assert committed(connect, sink.name) == first
            assert daemon.metric("offsetd_connector_left_stopped", connector=sink.name) == 0
        finally:
            cleanup(connect, sink)


def test_a_failure_the_engine_holds_back_after_a_skip_still_opens_the_breaker(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    """With a cooldown, the second failure at the skipped record is suppressed by the engine: it
    never reaches the guards, yet a failure that did not move so soon after a skip must open
    the breaker."""
    with daemon_setup(stack, tmp_path, mode="enforce") as setup:
        rules = tmp_path / "rules" / "guard-skip.yaml"
        rule: dict[str, Any] = YAML().load(rules.read_text())
        rule["limits"]["cooldown"] = "10m"
        with rules.open("w") as out:
            YAML().dump(rule, out)
        sink, first = poisoned_sink(connect, setup, good([5]))
        try:
            daemon = setup.start()
            setup.wait_outcome(sink.name, "executed")
            wait_committed(connect, sink, first + 2)
            move_back(connect, sink, first)

            def breakers() -> list[str]:
                listed = setup.cli("breaker", "list", "-o", "json")
                assert listed.exit_code == 0, listed.output
                return [b["connector"] for b in json.loads(listed.stdout)]

            wait_for("the breaker open", lambda: breakers() == [sink.name], 60)
            assert daemon.metric("offsetd_breaker_open", connector=sink.name) == 1
            held = setup.tallies(sink.name, "guard-skip")
            assert [t["outcome"] for t in held] == ["suppressed_cooldown"], held
            assert held[0]["last"]["record"] == f"{sink.topic}-0@{first}"
            assert [r["outcome"] for r in setup.outcomes(sink.name)] == ["executed"]
        finally:
            cleanup(connect, sink)


# -- the rewind action --------------------------------------------------------------------------


def test_a_rewind_rule_moves_a_sink_back_to_a_time_and_it_redelivers_from_there(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path
) -> None:
    remediation = {"blast_radius": {"max_failing_connectors": 1000}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        topic = unique(f"{setup.prefix}-topic")
        create_topic(setup.west, topic)
        produce(setup.west, topic, good(range(5)))
        time.sleep(0.5)
        when = datetime.now(UTC)  # after offsets 0-4 were written, before 5-9 are
        time.sleep(0.5)
        produce(setup.west, topic, good(range(5, 10)))
        sink = start_sink(connect, setup, "rewind", topic)
        try:
            wait_committed(connect, sink, 10)
            rule = {
                "name": "guard-rewind",
                "description": "Rewind this test's sink to a time when someone pauses it.",
                "mode": "enforce",
                "match": {"kind": "connector_status", "state": "PAUSED", "connector": sink.name},
                "when": {"count": 1, "within": "10m"},
                "actions": [{"type": "rewind", "to_timestamp": when.isoformat()}],
                "limits": {"budget": {"max": 1, "per": "1h"}, "cooldown": "1h"},
            }
            with (tmp_path / "rules" / "guard-rewind.yaml").open("w") as out:
                YAML().dump(rule, out)
            daemon = setup.start()
            response = connect.http.put(connect.path(sink.name, "/pause"))
            assert response.status_code == 202, response.text
            done = setup.wait_outcome(sink.name, "executed")
            assert done["rule"] == "guard-rewind"
            assert done["saga_status"] == "done", done
            assert [e["offset"]["kafka_offset"] for e in done["before"]] == [10]
            assert [e["offset"]["kafka_offset"] for e in done["after"]] == [5]
            assert done["snapshot_id"]
            assert f"offsetd offsets undo {done['snapshot_id']}" in done["message"]
            methods = [(c["method"], c["path"].rsplit("/", 1)[-1]) for c in done["http_calls"]]
            for call in (("PUT", "stop"), ("PATCH", "offsets"), ("PUT", "pause")):
                assert call in methods, methods
            assert ("PUT", "resume") not in methods  # it was PAUSED: it is PAUSED again
            status = connect.status(sink.name)
            assert status is not None
            assert status["connector"]["state"] == "PAUSED"
            assert committed(connect, sink.name) == 5
            assert daemon.metric("offsetd_connector_left_stopped", connector=sink.name) == 0
            executed = [r for r in setup.outcomes(sink.name) if r["outcome"] == "executed"]
            assert len(executed) == 1, setup.outcomes(sink.name)

            response = connect.http.put(connect.path(sink.name, "/resume"))
            assert response.status_code == 202, response.text
            expected = [f"{{n={i}}}" for i in [*range(10), *range(5, 10)]]
            wait_for("the records from offset 5 again", lambda: sink.lines() == expected)
            wait_committed(connect, sink, 10)
        finally:
            cleanup(connect, sink)
