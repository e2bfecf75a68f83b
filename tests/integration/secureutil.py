"""What tests on the secure stack share: Kafka and REST as the stack's administrator, offsetd run
as a person runs it with every word it says kept, and the stack's secrets to search for.

The plaintext helpers (`kafkautil`) take a bootstrap string and connect anonymously, which the
secure brokers refuse; these take the librdkafka settings of a principal instead. Every offsetd
run goes through a `Transcript`, so a test of the whole module can search all that offsetd
printed for a password.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.devstack.stack import StackInfo
from tests.integration.cliutil import leaf_argv
from tests.integration.kafkautil import ConnectClient, offset_of, produce_with, read_partition
from tests.integration.lagutil import OFFSETD

__all__ = [
    "SecureConnect",
    "Transcript",
    "consume_all",
    "create_topic",
    "produce",
    "stack_secrets",
    "topic_texts",
]


def stack_secrets(stack: StackInfo) -> list[str]:
    """Every password of the stack: SCRAM and REST passwords of all principals, the TLS stores'."""
    folder = Path(stack.security["folder"])
    saved = json.loads((folder / "passwords.json").read_text())
    store = (folder / "tls" / "store-password").read_text().strip()
    return [*saved["passwords"].values(), *saved["rest_passwords"].values(), store]


class SecureConnect(ConnectClient):
    """The plaintext tests' REST helper, over HTTPS as the stack's admin (its CA, basic auth)."""

    def __init__(self, stack: StackInfo) -> None:  # no super().__init__: it builds a plain client
        self.http = stack.connect_rest(timeout_s=30).http


def create_topic(conf: Mapping[str, str], name: str, partitions: int = 1) -> None:
    admin = AdminClient(dict(conf))
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)


def produce(
    conf: Mapping[str, str],
    topic: str,
    records: Sequence[tuple[bytes | None, bytes | None]],
    headers: list[tuple[str, str | bytes | None]] | None = None,
) -> list[int]:
    """Produce in order to partition 0; the offsets the broker assigned."""
    return produce_with(conf, topic, records, headers=headers)


def consume_all(conf: Mapping[str, str], topic: str, timeout_s: float = 15) -> list[Message]:
    """Every record now in every non-empty partition of `topic`, read without a consumer group,
    each partition asserted read whole."""
    admin = AdminClient(dict[str, str | int | float | bool](conf))
    metadata = admin.list_topics(topic, timeout=10).topics[topic]
    assert metadata.error is None, metadata.error
    out: list[Message] = []
    for partition in metadata.partitions:
        low, high = _watermarks(conf, topic, partition)
        if high <= low:
            continue
        got = read_partition(conf, topic, partition, timeout_s)
        assert got, f"{topic}-{partition} not read"
        assert offset_of(got[-1]) >= high - 1, f"{topic}-{partition} not read whole"
        out.extend(got)
    return out


def _watermarks(conf: Mapping[str, str], topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({**conf, "group.id": f"secure-ends-{uuid.uuid4().hex[:8]}"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def topic_texts(conf: Mapping[str, str], topic: str) -> str:
    """Keys, values and header names and values of every record of `topic`, as one text (bytes
    decoded leniently: a password is ASCII, so it survives the decoding wherever it sits)."""
    parts: list[str] = []
    for msg in consume_all(conf, topic):
        raw_headers = msg.headers() or []
        pairs = raw_headers.items() if isinstance(raw_headers, dict) else raw_headers
        for blob in [msg.key(), msg.value(), *(v for _k, v in pairs)]:
            if isinstance(blob, bytes):
                parts.append(blob.decode("utf-8", "replace"))
        parts.extend(str(k) for k, _v in pairs)
    return "\n".join(parts)


@dataclass
class Transcript:
    """Runs `offsetd` as its own process (librdkafka's and Spark's output included, which an
    in-process runner would not see) and keeps every stdout and stderr for the leak search."""

    texts: dict[str, str] = field(default_factory=dict)

    def keep(self, what: str, text: str) -> None:
        self.texts[f"{len(self.texts):03d} {what}"] = text

    def run(
        self,
        config: Path,
        *args: str,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 240,
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(OFFSETD), *leaf_argv(config, args)]
        done = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **(env or {})},
        )
        self.keep(" ".join(args[:3]) + " (stdout)", done.stdout)
        self.keep(" ".join(args[:3]) + " (stderr)", done.stderr)
        return done

    def run_watched(
        self, config: Path, *args: str, timeout: float = 240
    ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        """`run`, and the command lines of offsetd's process and all it starts (Spark's JVM),
        sampled every 0.3 s while it runs: what `ps` shows of it."""
        argv = [str(OFFSETD), *leaf_argv(config, args)]
        seen: set[str] = set()
        with subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as proc:
            outputs: list[tuple[str, str]] = []
            reader = threading.Thread(target=lambda: outputs.append(proc.communicate()))
            reader.start()
            deadline = time.monotonic() + timeout
            parent = psutil.Process(proc.pid)
            while reader.is_alive() and time.monotonic() < deadline:
                try:
                    family = [parent, *parent.children(recursive=True)]
                except psutil.NoSuchProcess:
                    break
                for member in family:
                    with contextlib.suppress(psutil.Error):
                        seen.add(" ".join(member.cmdline()))
                time.sleep(0.3)
            reader.join(max(deadline - time.monotonic(), 1))
            if reader.is_alive():
                proc.kill()
                reader.join(10)
        stdout, stderr = outputs[0] if outputs else ("", "")
        self.keep(" ".join(args[:3]) + " (stdout)", stdout)
        self.keep(" ".join(args[:3]) + " (stderr)", stderr)
        self.keep(" ".join(args[:3]) + " (command lines)", "\n".join(sorted(seen)))
        done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
        return done, sorted(seen)

    def ok(
        self,
        config: Path,
        *args: str,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        done = self.run(config, *args, input=input, env=env)
        assert done.returncode == 0, f"offsetd {' '.join(args)}: {done.stderr}{done.stdout}"
        return done.stdout

    def json_of(
        self,
        config: Path,
        *args: str,
        input: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Any:
        return json.loads(self.ok(config, *args, "-o", "json", input=input, env=env))
