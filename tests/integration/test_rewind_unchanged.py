"""Unchanged partitions are unchanged everywhere, on the real stack (issue 18, item 8).

A FileStreamSink (string values: one line per record) has read a two-partition topic to its end.
Partition 0's bad records are its last ten, so `after-last-match` puts partition 0 exactly where
the sink already is; partition 1's are early, so it is rewound. The plan must count one change;
`offsets import --dry-run` must say "PATCH 1 partition"; the real import must send Connect a
PATCH naming partition 1 only — seen on the wire, through a proxy in front of the real Connect —
and the sink must deliver again exactly partition 1's records from the target. A document whose
every partition is already at its target must change nothing: no stop, no PATCH, no resume.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.faultproxy import FaultProxy
from offsetd.offsets.rewind_plan import summary_path
from tests.integration.cliutil import offsetd
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    json_file_sink,
    produce,
    unique,
    wait_for,
)

RECORDS = 300  # per partition
BAD = {0: range(290, 300), 1: range(40, 50)}  # partition 0: its last ten records


class RecordingProxy(FaultProxy):
    """The fault proxy, forwarding everything unchanged, that also keeps each PATCH body to
    `/connectors/<c>/offsets`: what offsetd really sent Connect (offsets hold no secret)."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self.patches: list[dict[str, Any]] = []

    def _forward(
        self, method: str, raw_path: str, headers: list[tuple[str, str]], body: bytes
    ) -> Any:
        if method == "PATCH" and raw_path.split("?", maxsplit=1)[0].endswith("/offsets"):
            self.patches.append(json.loads(body))
        return super()._forward(method, raw_path, headers, body)

    def changes(self, since: int = 0) -> list[tuple[str, str]]:
        """Every request but a GET after the first `since` calls: (method, last path part)."""
        return [
            (c.method, c.path.rsplit("/", 1)[-1]) for c in self.calls[since:] if c.method != "GET"
        ]


def _value(p: int, i: int) -> bytes:
    return json.dumps({"p": p, "i": i, "bad": i in BAD[p]}).encode()


@pytest.fixture(scope="module")
def topic(west: str) -> str:
    name = unique("unchanged")
    create_topic(west, name, partitions=2)
    for p in (0, 1):
        offsets = produce(west, name, [(None, _value(p, i)) for i in range(RECORDS)], partition=p)
        assert offsets == list(range(RECORDS))  # a fresh topic: record i at offset i
    return name


@pytest.fixture(scope="module")
def sink(
    topic: str, connect: ConnectClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    name = unique("unchanged-sink")
    out = tmp_path_factory.mktemp("sink") / "out.txt"
    config = json_file_sink(
        topic, out, **{"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    )
    connect.create(name, config)
    connect.wait_running(name)
    _caught_up(connect, name)
    assert _lines(out) == 2 * RECORDS
    yield name, out
    connect.delete(name)


@pytest.fixture
def proxy(connect: ConnectClient) -> Iterator[RecordingProxy]:
    running = RecordingProxy(str(connect.http.base_url))
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def via_proxy(offsetd_yaml: Path, proxy: RecordingProxy, tmp_path: Path) -> Path:
    """offsetd.yaml with the Connect cluster's URL pointing at the recording proxy."""
    yaml = YAML()
    data = yaml.load(offsetd_yaml.read_text())
    for cluster in data["connect_clusters"].values():
        cluster["url"] = proxy.url
    out = tmp_path / "offsetd-proxy.yaml"
    with out.open("w") as handle:
        yaml.dump(data, handle)
    return out


def _committed(connect: ConnectClient, name: str) -> dict[int, int]:
    return {
        int(e["partition"]["kafka_partition"]): int(e["offset"]["kafka_offset"])
        for e in connect.offsets(name)["offsets"]
    }


def _caught_up(connect: ConnectClient, name: str) -> None:
    ends = {0: RECORDS, 1: RECORDS}
    wait_for(f"{name} to commit every record", lambda: _committed(connect, name) == ends, 120)


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def _sink_entry(topic: str, p: int, offset: int) -> dict[str, Any]:
    return {
        "partition": {"kafka_topic": topic, "kafka_partition": p},
        "offset": {"kafka_offset": offset},
    }


def _redelivered(connect: ConnectClient, name: str, out: Path, before: int) -> Counter[bytes]:
    """The lines the sink wrote since `before`, once it committed the log ends again (it
    flushes its file before each commit, so nothing it re-delivered is still to come)."""
    _caught_up(connect, name)
    return Counter(out.read_bytes().splitlines()[before:])


def test_a_target_at_the_committed_offset_is_unchanged_in_plan_dry_run_and_patch(
    offsetd_yaml: Path,
    via_proxy: Path,
    proxy: RecordingProxy,
    connect: ConnectClient,
    topic: str,
    sink: tuple[str, Path],
    tmp_path: Path,
) -> None:
    name, out = sink
    plan_path = tmp_path / "plan.json"
    made = offsetd(
        offsetd_yaml,
        "rewind",
        "plan",
        "--connector",
        name,
        "--mode",
        "after-last-match",
        "--predicate",
        "value.bad",
        "--value-schema",
        "p INT, i INT, bad BOOLEAN",
        "--out",
        str(plan_path),
    )
    assert made.exit_code == 0, made.stdout + made.stderr

    # The plan: partition 0's target (last match 299 + 1) is where the sink is.
    summary = json.loads(summary_path(plan_path).read_text())
    assert (summary["totals"]["changed"], summary["totals"]["unchanged"]) == (1, 1)
    rows = {row["partition"]: row for row in summary["partitions"]}
    assert (rows[0]["status"], rows[0]["next_offset"], rows[0]["committed"]) == (
        "unchanged",
        None,
        RECORDS,
    )
    assert (
        rows[0]["reason"] == f"last match at 299; the connector is already at {RECORDS}: unchanged"
    )
    assert (rows[1]["status"], rows[1]["next_offset"]) == ("changed", 50)
    assert "1 partition changes, 1 unchanged" in made.stdout
    assert json.loads(plan_path.read_text()) == {name: [_sink_entry(topic, 1, 50)]}

    # The dry run: one partition, said as such; nothing reaches Connect but reads.
    dry = offsetd(via_proxy, "offsets", "import", "--dry-run", str(plan_path))
    assert dry.exit_code == 0, dry.output + dry.stderr
    assert "3. PATCH 1 partition\n" in dry.output, dry.output
    assert "PATCH 2" not in dry.output
    diff = [line.split() for line in dry.output.splitlines() if '"kafka_partition":' in line]
    partition = json.dumps({"kafka_topic": topic, "kafka_partition": 1}, separators=(",", ":"))
    assert diff == [[partition, '{"kafka_offset":300}', '{"kafka_offset":50}', "changed"]]
    assert proxy.changes() == []

    # The real import: Connect receives partition 1 only, and delivers exactly its records again.
    before = _lines(out)
    applied = offsetd(via_proxy, "offsets", "import", str(plan_path), "--output", "json")
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert proxy.patches == [{"offsets": [_sink_entry(topic, 1, 50)]}]
    assert proxy.changes() == [("PUT", "stop"), ("PATCH", "offsets"), ("PUT", "resume")]
    [outcome] = json.loads(applied.stdout)
    read_back = {e["partition"]["kafka_partition"]: e["offset"] for e in outcome["offsets_after"]}
    assert read_back == {0: {"kafka_offset": RECORDS}, 1: {"kafka_offset": 50}}
    assert outcome["final_state"] == "RUNNING"
    assert _redelivered(connect, name, out, before) == Counter(
        _value(1, i) for i in range(50, RECORDS)
    )


def test_an_import_leaves_out_partitions_already_at_their_target(
    via_proxy: Path,
    proxy: RecordingProxy,
    connect: ConnectClient,
    topic: str,
    sink: tuple[str, Path],
    tmp_path: Path,
) -> None:
    """A document (a plan computed before this change, an edited export) naming a partition at
    its current offset: the dry run and the PATCH leave it out."""
    name, out = sink
    _caught_up(connect, name)
    document = tmp_path / "offsets.json"
    document.write_text(
        json.dumps({name: [_sink_entry(topic, 0, RECORDS), _sink_entry(topic, 1, 280)]})
    )
    dry = offsetd(via_proxy, "offsets", "import", "--dry-run", str(document))
    assert dry.exit_code == 0, dry.output + dry.stderr
    assert "3. PATCH 1 partition (1 already at its target: left out)\n" in dry.output, dry.output

    before = _lines(out)
    applied = offsetd(via_proxy, "offsets", "import", str(document))
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert proxy.patches == [{"offsets": [_sink_entry(topic, 1, 280)]}]
    assert _redelivered(connect, name, out, before) == Counter(
        _value(1, i) for i in range(280, RECORDS)
    )


def test_an_import_with_nothing_to_change_does_not_touch_the_connector(
    via_proxy: Path,
    proxy: RecordingProxy,
    connect: ConnectClient,
    topic: str,
    sink: tuple[str, Path],
    tmp_path: Path,
) -> None:
    name, out = sink
    _caught_up(connect, name)
    document = tmp_path / "offsets.json"
    document.write_text(
        json.dumps({name: [_sink_entry(topic, 0, RECORDS), _sink_entry(topic, 1, RECORDS)]})
    )
    dry = offsetd(via_proxy, "offsets", "import", "--dry-run", str(document))
    assert dry.exit_code == 0, dry.output + dry.stderr
    nothing = "nothing to change: all 2 partitions are already at their targets"
    assert f"1. {nothing}: nothing is written, and {name} stays RUNNING" in dry.output

    lines = _lines(out)
    applied = offsetd(via_proxy, "offsets", "import", str(document))
    assert applied.exit_code == 0, applied.output + applied.stderr
    assert (
        f"{nothing}: nothing was written and no snapshot taken; {name} was not touched (RUNNING)"
        in applied.output
    )
    assert "undo with" not in applied.output
    assert proxy.patches == []
    assert proxy.changes() == []  # no stop, no PATCH, no resume
    status = connect.status(name)
    assert status is not None
    assert status["connector"]["state"] == "RUNNING"
    assert _committed(connect, name) == {0: RECORDS, 1: RECORDS}
    assert _lines(out) == lines
