"""The ingest's batches: in a storm, several full `consume` batches framed at once (pure logic).

`Ingest._consume` asks the consumer for `batch` records within `poll_s`; while the answers come
back full (the topics hold more), it asks again without waiting, up to `max_batch_records` and
`max_batch_bytes`: fewer, larger frames for the owner, whose cost is per frame. A batch that
comes back short is framed as it is (a quiet topic's records wait no longer), and so is what
the budget allows. The consumer here plays back scripted answers and records how it was asked.
"""

from __future__ import annotations

from typing import Any

import confluent_kafka as ck

from offsetd.events.frames import route_status
from offsetd.ingest import Ingest, Source


class Consumer:
    def __init__(self, answers: list[int], value_bytes: int = 10) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[int, float]] = []
        self.value_bytes = value_bytes
        self.offset = 0

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        self.asked.append((num_messages, timeout))
        count = min(self.answers.pop(0), num_messages) if self.answers else 0
        made = []
        for _ in range(count):
            made.append(
                ck.Message(
                    topic="s", partition=0, offset=self.offset, value=b"v" * self.value_bytes
                )
            )
            self.offset += 1
        return made


def ingest(**knobs: Any) -> Ingest:
    return Ingest(
        {}, {"s": Source("c", route_status)}, "events", "group", batch=10, poll_s=0.02, **knobs
    )


def test_a_short_batch_is_framed_as_it_came() -> None:
    consumer = Consumer([7, 10, 10])
    assert len(ingest()._consume(consumer)) == 7  # type: ignore[arg-type]
    assert consumer.asked == [(10, 0.02)]


def test_full_batches_are_framed_together_up_to_the_record_budget() -> None:
    consumer = Consumer([10, 10, 10, 10, 10])
    batch = ingest(max_batch_records=30)._consume(consumer)  # type: ignore[arg-type]
    assert [m.offset() for m in batch] == list(range(30))  # in order
    assert consumer.asked == [(10, 0.02), (10, 0), (10, 0)]  # no wait after the first


def test_the_first_short_answer_ends_the_batch() -> None:
    consumer = Consumer([10, 4, 10])
    assert len(ingest(max_batch_records=100)._consume(consumer)) == 14  # type: ignore[arg-type]
    consumer = Consumer([10, 0, 10])
    assert len(ingest(max_batch_records=100)._consume(consumer)) == 10  # type: ignore[arg-type]


def test_the_byte_budget_ends_the_batch() -> None:
    consumer = Consumer([10] * 10, value_bytes=1000)  # 10 kB a full batch
    knobs = {"max_batch_records": 100, "max_batch_bytes": 25_000}
    batch = ingest(**knobs)._consume(consumer)  # type: ignore[arg-type]
    assert len(batch) == 30  # 20 kB under the budget: one more; 30 kB: done
