"""The audit's first read of a topic just created: a partition listed with a leader that does
not lead it yet answers NOT_LEADER_FOR_PARTITION for a moment (a fresh-clone run's daemon died
of it at its first start). Pure retry logic, with a consumer stand-in."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from offsetd import audit


class _Consumer:
    """Answers the watermark query with the given errors first, then (0, 5)."""

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.asked = 0

    def get_watermark_offsets(self, _partition: TopicPartition, timeout: float) -> Any:
        self.asked += 1
        if self.codes:
            raise KafkaException(KafkaError(self.codes.pop(0)))
        return (0, 5)


def test_a_partition_not_led_yet_is_asked_again() -> None:
    consumer = _Consumer(
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    )
    tp = TopicPartition("offsetd-audit", 0)
    assert audit._watermarks(consumer, tp, 5.0) == (0, 5)  # type: ignore[arg-type]
    assert consumer.asked == 4


def test_other_errors_and_the_deadline_are_raised() -> None:
    tp = TopicPartition("offsetd-audit", 0)
    denied = _Consumer(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        audit._watermarks(denied, tp, 5.0)  # type: ignore[arg-type]
    assert denied.asked == 1
    never = _Consumer(*[KafkaError.NOT_LEADER_FOR_PARTITION] * 1000)
    with pytest.raises(KafkaException):
        audit._watermarks(never, tp, 0.3)  # type: ignore[arg-type]
    assert 2 <= never.asked < 10
