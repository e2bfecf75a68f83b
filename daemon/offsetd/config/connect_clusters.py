"""`connect_clusters`: one Kafka Connect cluster per alias, its REST API and internal topics.

The httpx client arguments (auth, TLS context) are built by `offsetd.connect.transport`, next to
the client that uses them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator

from offsetd.config.fields import (
    ConfigModel,
    HttpUrl,
    NonEmptyStr,
    Secret,
    TopicName,
    none_to_empty,
    paired,
)
from offsetd.durations import Duration
from offsetd.yamlerrors import LocatedError

__all__ = ["ConnectAuth", "ConnectCluster", "ConnectTls", "ConnectorScope", "StrimziAccess"]


class ConnectAuth(ConfigModel):
    """HTTP basic auth for the Connect REST API."""

    username: NonEmptyStr
    password: Secret


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


class StrimziAccess(ConfigModel):
    """How offsetd reaches the Kubernetes API of a Strimzi-run Connect cluster.

    With this section offsetd asks the API whether the cluster is Strimzi-managed (a KafkaConnect
    with `strimzi.io/use-connector-resources: "true"` named `kafka_connect`, or whose status URL
    is this cluster's `url`) and then changes connectors through their KafkaConnector and
    KafkaMirrorMaker2 resources. Credentials: `kubeconfig` (and `context`), else `$KUBECONFIG` or
    `~/.kube/config`, else the pod's service account. `namespace`: where the resources are; when
    not set, the credentials' own: the pod's namespace (its service account's `namespace` file)
    in-cluster, else the kubeconfig context's namespace (`default` if it names none).
    """

    namespace: NonEmptyStr | None = None
    kafka_connect: NonEmptyStr | None = None
    kubeconfig: Path | None = None
    context: NonEmptyStr | None = None
    # A GitOps controller (Argo CD, Flux) would revert spec.state as Strimzi reverts REST.
    allow_gitops_managed: bool = False
    # How long the operator may take to act on a change (its reconcile interval is 120 s).
    operator_timeout: Annotated[Duration, Field(ge=1_000)] = 300_000


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
    # The workers' `consumer.auto.offset.reset` (Connect sets `earliest` for sinks unless the
    # worker config overrides it; a connector's `consumer.override.auto.offset.reset` wins):
    # where a sink that has committed nothing yet starts reading.
    consumer_auto_offset_reset: Literal["earliest", "latest", "none"] = "earliest"
    orchestrator: Literal["none", "strimzi"] = "none"
    strimzi: StrimziAccess | None = None
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
