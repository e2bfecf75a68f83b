"""`connect_clusters`: one Kafka Connect cluster per alias, its REST API and internal topics.

The httpx client arguments (auth, TLS context) are built by `offsetd.connect.transport`, next to
the client that uses them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, SecretStr, model_validator

from offsetd.config.fields import (
    ConfigModel,
    HttpUrl,
    NonEmptyStr,
    TopicName,
    none_to_empty,
    paired,
)
from offsetd.yamlerrors import LocatedError

__all__ = ["ConnectAuth", "ConnectCluster", "ConnectTls", "ConnectorScope"]


class ConnectAuth(ConfigModel):
    """HTTP basic auth for the Connect REST API."""

    username: NonEmptyStr
    password: SecretStr


class ConnectTls(ConfigModel):
    """TLS for an https Connect REST API; `verify: false` skips server verification."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    verify: bool = True

    @model_validator(mode="after")
    def _check_pairs(self) -> Self:
        problems = paired(("cert_file", self.cert_file), ("key_file", self.key_file))
        if problems:
            raise LocatedError(problems)
        return self


_LABEL_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._/-]{0,252})=(.+)")


def _check_label(entry: str) -> str:
    if not _LABEL_RE.fullmatch(entry):
        raise ValueError(
            f"{entry!r} is not key=value (a connector carries the label as its config entry "
            "offsetd.label.<key>=<value>; keys: letters, digits, '.', '_', '/', '-')"
        )
    return entry


class ConnectorScope(ConfigModel):
    """The connectors a deployment owns (offsetd.scope): names or globs, or `key=value` labels
    (connector config entries `offsetd.label.<key>=<value>`); any match admits. Empty: all."""

    connectors: Annotated[list[NonEmptyStr], none_to_empty(list)] = Field(default_factory=list)
    labels: Annotated[list[Annotated[str, AfterValidator(_check_label)]], none_to_empty(list)] = (
        Field(default_factory=list)
    )


class ConnectCluster(ConfigModel):
    """One Kafka Connect cluster: its REST API and the Kafka cluster holding its internal topics."""

    url: HttpUrl
    auth: ConnectAuth | None = None
    tls: ConnectTls | None = None
    kafka_cluster: NonEmptyStr
    group_id: NonEmptyStr = "connect-cluster"
    offsets_topic: TopicName = "connect-offsets"
    configs_topic: TopicName = "connect-configs"
    status_topic: TopicName = "connect-status"
    dlq_topics: Annotated[list[TopicName], none_to_empty(list)] = Field(default_factory=list)
    orchestrator: Literal["none", "strimzi"] = "none"
    # The connectors offsetd acts on here (offsetd.scope); None: remediation.scope applies.
    scope: ConnectorScope | None = None

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.tls is not None and not self.url.lower().startswith("https:"):
            problems.append((("tls",), "only used with an https:// url"))
        seen: dict[str, str] = {}
        for field in ("offsets_topic", "configs_topic", "status_topic"):
            topic = getattr(self, field)
            if topic in seen:
                problems.append(((field,), f"must differ from {seen[topic]} ({topic!r})"))
            seen.setdefault(topic, field)
        if problems:
            raise LocatedError(problems)
        return self
