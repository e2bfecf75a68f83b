"""`retry_blocking`: the one retry policy for a call made in a worker thread, and the control
store's use of it — a watermark query on a topic just made, answered NOT_LEADER for a moment
(seen starting four daemons at once on a loaded machine), is asked again instead of stopping
the daemon."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from offsetd.errors import OffsetdError
from offsetd.remediation.control import _kafka_retriable
from offsetd.retry import retry_blocking


def test_a_retriable_error_is_asked_again_after_each_delay() -> None:
    busy: Exception = OffsetdError("busy", retriable=True)
    answers: list[Exception | str] = [busy, busy, "done"]
    slept: list[float] = []

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retry_blocking(call, [0.1, 0.2, 0.4], sleep=slept.append) == "done"
    assert slept == [0.1, 0.2]


def test_another_error_and_the_last_one_are_raised() -> None:
    def refused() -> None:
        raise OffsetdError("no", retriable=False)

    with pytest.raises(OffsetdError, match="no"):
        retry_blocking(refused, [0.1], sleep=lambda _s: None)
    slept: list[float] = []

    def busy() -> None:
        raise OffsetdError("busy", retriable=True)

    with pytest.raises(OffsetdError, match="busy"):
        retry_blocking(busy, [0.1, 0.2], sleep=slept.append)
    assert slept == [0.1, 0.2]


def test_librdkafkas_retriable_mark_decides_for_the_control_topic() -> None:
    not_leader = KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION, retriable=True))
    denied = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    assert _kafka_retriable(not_leader)
    assert not _kafka_retriable(denied)
    assert not _kafka_retriable(ValueError("x"))
