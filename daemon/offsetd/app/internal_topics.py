"""Every topic the daemon reads or writes, created and confirmed before faust joins its group.

faust creates its internal topics itself, right before its consumer subscribes, and the group
leader assigns partitions on the metadata its client has at that moment. On a new deployment
the events topic was created a few milliseconds before that metadata was read, and the broker
answering had not applied it yet: the assignment left the topic out ("Ignoring missing topic"),
and the agent decided nothing until the consumer's next metadata refresh, five minutes later.

So `offsetd run` creates them all first — the events topic, the state table's changelog, faust's
leader topic, the audit, sagas, control and quarantine topics — and waits until *every* broker's
metadata lists each of them with a leader for every partition. faust then finds them in its
client's metadata and creates nothing. A topic that exists with the wrong partition count for
its role is a configuration mistake, said in one line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped]
from aiokafka.errors import KafkaError as AioKafkaError  # type: ignore[import-untyped]
from aiokafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.app.broker import STATE_TABLE, aiokafka_auth
from offsetd.audit import ensure_topic as ensure_audit_topic
from offsetd.config import Settings
from offsetd.errors import OffsetdError
from offsetd.ingest import ensure_events_topic
from offsetd.kafkaaccess import raise_if_denied
from offsetd.remediation.control import ensure_topic as ensure_control_topic
from offsetd.remediation.quarantine import Quarantine
from offsetd.remediation.sagas import ensure_topic as ensure_sagas_topic

__all__ = [
    "InternalTopicsError",
    "TopicWanted",
    "events_topic_name",
    "faust_topics",
    "prepare_internal_topics",
    "unconfirmed",
]


class InternalTopicsError(OffsetdError):
    """An internal topic cannot be created, has the wrong shape, or never shows on a broker."""

    exit_code = 21


@dataclass(frozen=True)
class TopicWanted:
    """One topic faust would create itself: its name, partitions and topic config."""

    name: str
    partitions: int
    config: Mapping[str, str]


def events_topic_name(app_id: str) -> str:
    return f"{app_id}-events"


def faust_topics(settings: Settings) -> list[TopicWanted]:
    """The topics faust declares for the daemon (names and configs as faust makes them: the
    changelog `<app>-<table>-changelog` compacted, co-partitioned with the events topic; the
    leader topic `<app>-__assignor-__leader`, one partition). A unit test holds these names
    against the faust app `build_app` makes."""
    daemon = settings.daemon
    return [
        TopicWanted(
            f"{daemon.app_id}-{STATE_TABLE}-changelog",
            daemon.partitions,
            {"cleanup.policy": "compact"},
        ),
        TopicWanted(f"{daemon.app_id}-__assignor-__leader", 1, {}),
    ]


def prepare_internal_topics(settings: Settings, alias: str, *, timeout_s: float = 60.0) -> None:
    """Create what is missing, check the partition counts, wait until every broker sees all.

    Raises InternalTopicsError (or KafkaAccessDenied naming the ACL) when it cannot be done.
    """
    kafka = settings.kafka_clusters[alias]
    conf = kafka.client_config()
    daemon, remediation = settings.daemon, settings.remediation
    replication = daemon.replication_factor or 1
    events = events_topic_name(daemon.app_id)
    ensure_events_topic(conf, events, daemon.partitions, replication)
    admin = AdminClient(dict(conf))
    for wanted in faust_topics(settings):
        _ensure(admin, conf, wanted, replication, timeout_s)
    ensure_audit_topic(conf, daemon.audit_topic)
    ensure_sagas_topic(conf, remediation.sagas_topic)
    ensure_control_topic(conf, remediation.control_topic)
    Quarantine.from_settings(settings).ensure_topic()
    names = [
        events,
        *(t.name for t in faust_topics(settings)),
        daemon.audit_topic,
        remediation.sagas_topic,
        remediation.control_topic,
        remediation.quarantine_topic,
    ]
    missing = asyncio.run(
        _confirmed_everywhere(kafka.bootstrap_servers, aiokafka_auth(kafka), names, timeout_s)
    )
    if missing:
        raise InternalTopicsError(
            f"offsetd's topics were created but after {timeout_s:g} s some brokers still do not "
            f"list them with a leader: {'; '.join(missing)}"
        )


def _ensure(
    admin: AdminClient,
    conf: Mapping[str, str],
    wanted: TopicWanted,
    replication: int,
    timeout_s: float,
) -> None:
    found = admin.list_topics(timeout=timeout_s).topics.get(wanted.name)
    if found is not None and found.error is None:
        if len(found.partitions) != wanted.partitions:
            raise InternalTopicsError(
                f"{wanted.name} has {len(found.partitions)} partitions, the daemon needs "
                f"{wanted.partitions}: delete it (it is rebuilt) or set daemon.partitions"
            )
        return
    new = NewTopic(wanted.name, wanted.partitions, replication, config=dict(wanted.config))
    try:
        admin.create_topics([new], operation_timeout=timeout_s)[wanted.name].result(
            timeout=timeout_s
        )
    except KafkaException as exc:
        reason = exc.args[0]
        if isinstance(reason, KafkaError) and reason.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return
        raise_if_denied(reason, conf, topic=("CREATE", wanted.name))
        text = reason.str() if isinstance(reason, KafkaError) else str(reason)
        raise InternalTopicsError(f"cannot create {wanted.name}: {text}") from None


def unconfirmed(topics: Sequence[Any], wanted: Sequence[str]) -> list[str]:
    """What one broker's metadata answer lacks: topics absent, in error, or with a partition
    that has no leader (`topics` as the Metadata response lists them: error code, name, ...,
    partitions of (error code, partition, leader, ...))."""
    seen = {str(t[1]): t for t in topics}
    problems = []
    for name in wanted:
        topic = seen.get(name)
        if topic is None or topic[0] != 0:
            problems.append(f"{name} unknown")
            continue
        partitions = topic[-1]
        if not partitions or any(p[0] != 0 or p[2] < 0 for p in partitions):
            problems.append(f"{name} has a partition without a leader")
    return problems


async def _confirmed_everywhere(
    bootstrap: str, auth: Mapping[str, Any], names: Sequence[str], timeout_s: float
) -> list[str]:
    """Ask every broker for these topics until each lists them all with leaders; what is still
    missing at the deadline (empty: confirmed)."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap, client_id="offsetd-topics", **dict(auth))
    deadline = time.monotonic() + timeout_s
    problems: list[str] = ["no broker answered"]
    try:
        await asyncio.wait_for(client.bootstrap(), timeout_s)
        brokers = [b.nodeId for b in client.cluster.brokers()]
        pending = set(brokers)
        while pending and time.monotonic() < deadline:
            problems = []
            for node in sorted(pending):
                answer = await client.send(node, MetadataRequest(list(names), False))
                lacks = unconfirmed(answer.topics, names)
                if lacks:
                    problems.append(f"broker {node}: {', '.join(lacks)}")
                else:
                    pending.discard(node)
            if pending:
                await asyncio.sleep(0.05)
        return problems if pending else []
    except (AioKafkaError, OSError, TimeoutError) as exc:
        return [*problems, f"the metadata check failed: {exc!r}"]
    finally:
        await client.close()
