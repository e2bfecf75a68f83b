"""Where a connector's offsets live, resolved from its config and the worker's settings.

Online operations go through REST, which knows this; offline operations and target resolution
(ListOffsets against the right cluster) must get it right themselves:

- sink: the consumer group `consumer.override.group.id`, else the worker's `consumer.group.id`,
  else `connect-<name>`, on the consumer's cluster (`consumer.override.bootstrap.servers`, else
  the worker's);
- source: the worker's offsets topic, plus a connector-specific `offsets.storage.topic` (on the
  producer's cluster when `producer.override.bootstrap.servers` is set); with exactly-once source
  support, writes are transactional;
- MirrorSourceConnector: its records come from `source.cluster.alias` / its bootstrap servers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from offsetd.config import Settings
from offsetd.errors import ConfigError
from offsetd.offsets.model import ConnectorKind

__all__ = [
    "KafkaEndpoint",
    "OffsetsLocation",
    "WorkerView",
    "endpoint_for",
    "parse_properties",
    "resolve_location",
    "worker_view",
]


@dataclass(frozen=True)
class KafkaEndpoint:
    """A Kafka cluster: its alias in offsetd.yaml when it has one, and its bootstrap servers."""

    bootstrap: str
    alias: str | None = None

    def describe(self) -> str:
        return f"{self.alias} ({self.bootstrap})" if self.alias else self.bootstrap

    def client_config(self, settings: Settings | None) -> dict[str, str]:
        """Client settings: the alias's (TLS/SASL included) or plain bootstrap servers."""
        if settings is not None and self.alias in settings.kafka_clusters:
            return settings.kafka_clusters[self.alias].client_config()
        return {"bootstrap.servers": self.bootstrap}


@dataclass(frozen=True)
class WorkerView:
    """What offsetd knows of the Connect workers' own settings."""

    cluster: KafkaEndpoint | None
    offsets_topic: str = "connect-offsets"
    properties: Mapping[str, str] = field(default_factory=dict)
    configs_topic: str = "connect-configs"

    @property
    def exactly_once(self) -> bool:
        return self.properties.get("exactly.once.source.support", "disabled") == "enabled"


@dataclass(frozen=True)
class OffsetsLocation:
    connector: str
    kind: ConnectorKind
    sink_group: str | None = None
    offsets_topics: tuple[tuple[str, KafkaEndpoint | None], ...] = ()
    data_cluster: KafkaEndpoint | None = None
    exactly_once: bool = False

    def describe(self) -> str:
        if self.kind is ConnectorKind.SINK:
            where = self.data_cluster.describe() if self.data_cluster else "an unknown cluster"
            return f"consumer group {self.sink_group} on {where}"
        topics = ", ".join(
            f"{topic} on {cluster.describe() if cluster else 'the worker cluster'}"
            for topic, cluster in self.offsets_topics
        )
        extra = " (exactly-once: transactional writes)" if self.exactly_once else ""
        return f"offsets topic {topics}{extra}"


def endpoint_for(bootstrap: str, settings: Settings | None) -> KafkaEndpoint:
    """Match bootstrap servers to a configured alias (same host:port set), if any."""
    wanted = _servers(bootstrap)
    if settings is not None:
        for alias, cluster in settings.kafka_clusters.items():
            if _servers(cluster.bootstrap_servers) & wanted:
                return KafkaEndpoint(cluster.bootstrap_servers, alias)
    return KafkaEndpoint(bootstrap)


def _servers(bootstrap: str) -> set[str]:
    return {s.strip().lower() for s in bootstrap.split(",") if s.strip()}


def worker_view(
    settings: Settings | None,
    connect_cluster: str | None,
    properties: Mapping[str, str] | None = None,
) -> WorkerView:
    """The worker settings from offsetd.yaml, overridden by a worker.properties file if given."""
    props = dict(properties or {})
    cluster: KafkaEndpoint | None = None
    offsets_topic = props.get("offset.storage.topic", "connect-offsets")
    configs_topic = props.get("config.storage.topic", "connect-configs")
    if settings is not None and connect_cluster in settings.connect_clusters:
        connect = settings.connect_clusters[connect_cluster]
        kafka = settings.kafka_clusters[connect.kafka_cluster]
        cluster = KafkaEndpoint(kafka.bootstrap_servers, connect.kafka_cluster)
        offsets_topic = props.get("offset.storage.topic", connect.offsets_topic)
        configs_topic = props.get("config.storage.topic", connect.configs_topic)
    if "bootstrap.servers" in props:
        cluster = endpoint_for(props["bootstrap.servers"], settings)
    return WorkerView(cluster, offsets_topic, props, configs_topic)


def resolve_location(
    name: str,
    config: Mapping[str, str],
    kind: ConnectorKind,
    worker: WorkerView,
    settings: Settings | None = None,
) -> OffsetsLocation:
    if kind is ConnectorKind.SINK:
        group = config.get(
            "consumer.override.group.id",
            worker.properties.get("consumer.group.id", f"connect-{name}"),
        )
        override = config.get("consumer.override.bootstrap.servers")
        cluster = endpoint_for(override, settings) if override else worker.cluster
        return OffsetsLocation(name, kind, sink_group=group, data_cluster=cluster)
    producer = config.get("producer.override.bootstrap.servers")
    producer_cluster = endpoint_for(producer, settings) if producer else worker.cluster
    topics: list[tuple[str, KafkaEndpoint | None]] = []
    if "offsets.storage.topic" in config:
        topics.append((config["offsets.storage.topic"], producer_cluster))
    elif worker.exactly_once and producer:
        # Exactly-once tasks always get a store on the producer's cluster: the connector's topic,
        # else a topic with the worker's topic *name* there.
        topics.append((worker.offsets_topic, producer_cluster))
    if (worker.offsets_topic, worker.cluster) not in topics:
        topics.append((worker.offsets_topic, worker.cluster))
    mirror_source = kind is ConnectorKind.MIRROR_SOURCE
    data_cluster = _mirror_source_cluster(config, settings) if mirror_source else None
    return OffsetsLocation(
        name,
        kind,
        offsets_topics=tuple(topics),
        data_cluster=data_cluster,
        exactly_once=worker.exactly_once,
    )


def _mirror_source_cluster(config: Mapping[str, str], settings: Settings | None) -> KafkaEndpoint:
    alias = config.get("source.cluster.alias", "source")
    if settings is not None and alias in settings.kafka_clusters:
        return KafkaEndpoint(settings.kafka_clusters[alias].bootstrap_servers, alias)
    bootstrap = config.get("source.cluster.bootstrap.servers")
    if not bootstrap:
        raise ConfigError(
            f"MM2 source cluster {alias!r} is not in offsetd.yaml kafka_clusters and the "
            "connector config has no source.cluster.bootstrap.servers: add it to kafka_clusters"
        )
    return endpoint_for(bootstrap, settings)


def parse_properties(text: str) -> dict[str, str]:
    """A Java .properties file, as `java.util.Properties.load` reads it.

    Comments start with `#` or `!`; a key ends at the first unescaped `=`, `:` or whitespace;
    a trailing backslash continues the line (leading whitespace of the next line dropped);
    `\\t \\n \\r \\f \\uXXXX` and escaped separators are unescaped.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, rest = _split_key(line)
        # Java keeps trailing blanks in values; Kafka's ConfigDef trims them, and so do we.
        props[_unescape(key)] = _unescape(rest).rstrip(" \t\f")
    return props


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        part = raw.lstrip(" \t\f")
        if pending is None and (not part or part[0] in "#!"):
            continue
        part = part if pending is None else pending + part
        trailing = len(part) - len(part.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line continues
            pending = part[:-1]
            continue
        pending = None
        lines.append(part)
    if pending:
        lines.append(pending)
    return lines


def _split_key(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\":
            index += 2
            continue
        if char in "=: \t\f":
            break
        index += 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(value: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(value):
        char = value[index]
        if char != "\\" or index + 1 >= len(value):
            out.append(char)
            index += 1
            continue
        nxt = value[index + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", value[index + 2 : index + 6]):
            out.append(chr(int(value[index + 2 : index + 6], 16)))
            index += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        index += 2
    return "".join(out)
