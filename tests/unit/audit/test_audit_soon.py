"""AuditLog.write_soon's bookkeeping (pure logic, a scripted producer): a tally whose write
failed is written again, its latest version, and nothing is left unconfirmed once delivered.
tests/integration/test_audit.py writes tallies to a real topic."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from offsetd.audit import AuditLog


class _Failure:
    def str(self) -> str:
        return "Broker: Message size too large"


class ScriptedProducer:
    """Queues produced messages; the test delivers them (`deliver`), failing the keys in
    `fail_once` once. `poll` delivers nothing: the test decides when reports come."""

    def __init__(self, fail_once: set[str]) -> None:
        self.fail_once = set(fail_once)
        self.queued: list[tuple[str, bytes, Callable[[Any, Any], None]]] = []
        self.produced: list[tuple[str, bytes]] = []

    def produce(self, _topic: str, *, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.queued.append((key.decode(), value, on_delivery))
        self.produced.append((key.decode(), value))

    def poll(self, _timeout: float) -> int:
        return 0

    def deliver(self) -> None:
        queued, self.queued = self.queued, []
        for key, _value, on_delivery in queued:
            if key in self.fail_once:
                self.fail_once.discard(key)
                on_delivery(_Failure(), None)
            else:
                on_delivery(None, None)


def _log(producer: ScriptedProducer) -> AuditLog:
    log = AuditLog({"bootstrap.servers": "127.0.0.1:1"}, "audit")
    log._producer = producer  # type: ignore[assignment]
    return log


def test_a_failed_tally_write_is_written_again_in_its_latest_version(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = ScriptedProducer(fail_once={"t1"})
    log = _log(producer)
    log.write_soon([{"id": "t1", "count": 1}, {"id": "t2", "count": 1}])
    log.write_soon([{"id": "t2", "count": 2}])
    with caplog.at_level(logging.ERROR, logger="offsetd.audit"):
        producer.deliver()  # t1 fails; t2's first version is superseded, its second arrives
    assert "did not take tally t1" in caplog.text
    assert log.unconfirmed == 1
    log.write_soon([{"id": "t3", "count": 1}])  # t1 goes again, as it was last written
    assert sorted(producer.produced[-2:]) == [
        ("t1", b'{"id": "t1", "count": 1}'),
        ("t3", b'{"id": "t3", "count": 1}'),
    ]
    producer.deliver()
    assert log.unconfirmed == 0


def test_a_newer_version_replaces_a_failed_one() -> None:
    producer = ScriptedProducer(fail_once={"t1"})
    log = _log(producer)
    log.write_soon([{"id": "t1", "count": 1}])
    producer.deliver()  # t1's first version failed
    log.write_soon([{"id": "t1", "count": 5}])  # the newer count goes, not the old one again
    assert [v for k, v in producer.produced if k == "t1"] == [
        b'{"id": "t1", "count": 1}',
        b'{"id": "t1", "count": 5}',
    ]
    producer.deliver()
    assert log.unconfirmed == 0
