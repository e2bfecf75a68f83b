"""How one ListOffsets request is split into C calls and the answers put back in its order.

The C call is replaced by a function answering from the request (pure logic; the real call is
tested on the stack in tests/integration/test_lag_list_offsets.py)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition

from offsetd.lag import kafka_io


class _Info:
    def __init__(self, offset: int) -> None:
        self.offset = offset


def _answers(result: list[Any]) -> list[int | str]:
    return ["error" if isinstance(a, KafkaError) else a.offset for a in result]


def test_batches_answer_in_request_order_and_a_missing_partition_fails_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []

    def c_call(_admin: Any, part: list[TopicPartition], future: Any, **_kw: Any) -> None:
        calls.append(len(part))
        # answers in reverse order, one partition left out
        future.set_result(
            {tp: _Info(tp.partition * 10) for tp in reversed(part) if tp.partition != 3}
        )

    monkeypatch.setattr(kafka_io, "_C_LIST_OFFSETS", c_call)
    request = [TopicPartition("t", p, -1) for p in range(10)]
    result = kafka_io._c_list_offsets(None, request, IsolationLevel.READ_COMMITTED, 1.0, 4)  # type: ignore[arg-type]
    assert calls == [4, 4, 2]
    assert _answers(result) == [0, 10, 20, "error", 40, 50, 60, 70, 80, 90]
    whole = kafka_io._c_list_offsets(None, request, IsolationLevel.READ_COMMITTED, 1.0, None)  # type: ignore[arg-type]
    assert calls[-1] == 10
    assert _answers(whole) == _answers(result)


def test_a_failed_call_fails_only_its_own_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    def c_call(_admin: Any, part: list[TopicPartition], future: Any, **_kw: Any) -> None:
        if part[0].partition == 0:
            future.set_exception(KafkaException(KafkaError(KafkaError._TIMED_OUT)))
        else:
            future.set_result({tp: _Info(tp.partition) for tp in part})

    monkeypatch.setattr(kafka_io, "_C_LIST_OFFSETS", c_call)
    request = [TopicPartition("t", p, -1) for p in range(5)]
    result = kafka_io._c_list_offsets(None, request, IsolationLevel.READ_COMMITTED, 1.0, 2)  # type: ignore[arg-type]
    assert _answers(result) == ["error", "error", 2, 3, 4]
