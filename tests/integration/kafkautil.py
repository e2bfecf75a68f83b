"""Small helpers the integration tests share: topics, produce, consume, REST and polling."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

T = TypeVar("T")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    """Poll until `probe` returns something truthy; fail naming `what` and the last value seen."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}; last seen: {last!r}")


def offset_of(msg: Message) -> int:
    offset = msg.offset()
    assert offset is not None
    return offset


def headers_of(msg: Message) -> dict[str, bytes]:
    """A record's headers as a dict (the client returns a list of pairs for consumed records)."""
    raw = msg.headers() or []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return {key: value for key, value in pairs if isinstance(value, bytes)}


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    partition: int = 0,
    timestamps: Sequence[int] | None = None,
) -> list[int]:
    """Produce in order to one partition and return the offsets the broker assigned.

    `timestamps`: the records' create times (ms), one per record; default: now."""
    return produce_with(
        {"bootstrap.servers": bootstrap}, topic, records, partition, timestamps=timestamps
    )


def produce_with(
    conf: Mapping[str, str],
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    partition: int = 0,
    *,
    timestamps: Sequence[int] | None = None,
    headers: list[tuple[str, str | bytes | None]] | None = None,
) -> list[int]:
    """`produce` with the client settings `conf` (a principal's, on a secure cluster)."""
    producer = Producer({**conf, "enable.idempotence": True})
    offsets: list[int] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(offset_of(msg))

    times = list(timestamps) if timestamps is not None else [0] * len(records)
    assert len(times) == len(records), "one timestamp per record"
    for (key, value), ts in zip(records, times, strict=True):
        producer.produce(
            topic,
            value=value,
            key=key,
            partition=partition,
            timestamp=ts,
            headers=headers,
            on_delivery=on_delivery,
        )
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} records not delivered to {topic}"
    assert not errors, f"delivery errors: {errors}"
    return offsets


def consume_all(
    bootstrap: str, topic: str, partition: int = 0, timeout_s: float = 10
) -> list[Message]:
    """Every record currently in one partition, read without a consumer group."""
    return read_partition({"bootstrap.servers": bootstrap}, topic, partition, timeout_s)


def read_partition(
    conf: Mapping[str, str], topic: str, partition: int, timeout_s: float = 10
) -> list[Message]:
    """Every record currently in one partition, read with the client settings `conf` (a
    principal's, on a secure cluster) and no consumer group."""
    consumer = Consumer({**conf, "group.id": unique("reader"), "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.assign([TopicPartition(topic, partition, low)])
        out: list[Message] = []
        deadline = time.monotonic() + timeout_s
        while (not out or offset_of(out[-1]) < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append(msg)
        return out
    finally:
        consumer.close()


class ConnectClient:
    """Plain REST calls for tests (deliberately not offsetd's own client, which tests check)."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    @staticmethod
    def path(name: str, suffix: str = "") -> str:
        return f"/connectors/{quote(name, safe='')}{suffix}"

    def create(self, name: str, config: dict[str, str]) -> None:
        response = self.http.put(self.path(name, "/config"), json=config)
        assert response.status_code in (200, 201), response.text

    def delete(self, name: str) -> None:
        self.http.delete(self.path(name))

    def status(self, name: str) -> dict[str, Any] | None:
        response = self.http.get(self.path(name, "/status"))
        return response.json() if response.status_code == 200 else None

    def offsets(self, name: str) -> dict[str, Any]:
        response = self.http.get(self.path(name, "/offsets"))
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    def wait_running(self, name: str, timeout_s: float = 60) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            status = self.status(name)
            if status is None:
                return None
            states = [status["connector"]["state"]] + [t["state"] for t in status["tasks"]]
            assert "FAILED" not in states, status
            return status if status["tasks"] and set(states) == {"RUNNING"} else None

        return wait_for(f"{name} RUNNING", probe, timeout_s)


def json_file_sink(topic: str, out: Path, **extra: str) -> dict[str, str]:
    """A FileStreamSink of schemaless JSON values with string keys, from the earliest record."""
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "file": str(out),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "consumer.override.auto.offset.reset": "earliest",
        **extra,
    }


def dlq_json_file_sink(topic: str, out: Path, dlq: str, **extra: str) -> dict[str, str]:
    """The poison-record recipe: `json_file_sink` that dies on a bad record (tolerance none)
    after Connect wrote it, with its context headers, to the DLQ `dlq`."""
    return json_file_sink(
        topic,
        out,
        **{
            "errors.tolerance": "none",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            **extra,
        },
    )


def string_file_source(source: Path, topic: str) -> dict[str, str]:
    """A FileStreamSource writing each line of `source` as a plain string record."""
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": str(source),
        "topic": topic,
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
