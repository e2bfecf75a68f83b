"""Which connectors a deployment owns: the scope. Pure: no I/O, nothing but data in and out.

Teams share Connect clusters, and several offsetd deployments may watch one. Each owns a declared
set of connectors and never acts on the rest. A scope (`remediation.scope`, or a Connect
cluster's own `connect_clusters.<name>.scope`, which replaces it for that cluster) lists:

- `connectors`: names or globs (`fnmatch`, case-sensitive: `orders-*`, `payments-sink`);
- `labels`: `key=value` entries. Kafka Connect has no labels, so a label is a connector config
  entry `offsetd.label.<key>=<value>` (Connect keeps config keys it does not know, and shows
  them in `GET /connectors/<name>`; verified with a FileStreamSink).

A connector is in scope when its name matches any entry of `connectors` or it carries any label
of `labels`. An empty scope is every connector (offsetd's behaviour before scopes existed).

`Scope.check` answers True, False, or None: the scope depends on labels, the name matches no
entry, and the connector's labels are not known yet (no metadata from Connect). None is not
"out": the daemon does not drop such an event, and the scope guard does not act on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only types: this module stays free of the settings' imports
    from offsetd.config import ConnectCluster, ConnectorScope, RemediationSettings
    from offsetd.rules.models import ConnectorMeta

__all__ = ["LABEL_PREFIX", "Scope", "ScopeVerdict", "labels_of", "scope_of", "split_owner_key"]

#: Connector config entries `offsetd.label.<key>=<value>` are the connector's labels.
LABEL_PREFIX = "offsetd.label."


@dataclass(frozen=True)
class ScopeVerdict:
    """`in_scope`: True (ours), False (not ours), None (its labels are not known yet)."""

    in_scope: bool | None
    detail: str


@dataclass(frozen=True)
class Scope:
    """The effective scope of one Connect cluster; `source` names the setting it comes from."""

    connectors: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    source: str = "remediation.scope"

    @classmethod
    def of(cls, model: ConnectorScope | None, source: str) -> Scope:
        if model is None:
            return cls(source=source)
        labels = tuple((key, value) for key, _, value in (e.partition("=") for e in model.labels))
        return cls(tuple(model.connectors), labels, source)

    @property
    def everything(self) -> bool:
        return not self.connectors and not self.labels

    def check(self, connector: str, labels: Mapping[str, str] | None) -> ScopeVerdict:
        """Is `connector` (with its `labels`, None if unknown) in this scope?"""
        if self.everything:
            return ScopeVerdict(True, f"{self.source} is empty: every connector")
        glob = next((g for g in self.connectors if fnmatchcase(connector, g)), None)
        if glob is not None:
            return ScopeVerdict(True, f"{connector} matches {self.source}.connectors {glob!r}")
        if not self.labels:
            return ScopeVerdict(False, f"{connector} matches no entry of {self.source}")
        if labels is None:
            return ScopeVerdict(
                None,
                f"{connector} matches no name of {self.source}, and its labels are not known "
                "yet (no connector metadata from Connect)",
            )
        found = next(((k, v) for k, v in self.labels if labels.get(k) == v), None)
        if found is not None:
            key, value = found
            return ScopeVerdict(True, f"{connector} carries {self.source}.labels {key}={value}")
        return ScopeVerdict(
            False, f"{connector} matches no name and carries no label of {self.source}"
        )

    def check_meta(self, connector: str, meta: ConnectorMeta | None) -> ScopeVerdict:
        """`check` with the labels of the connector's metadata (None: not known yet)."""
        return self.check(connector, meta.labels if meta is not None else None)

    def describe(self) -> str:
        """One line for the log: what this scope admits."""
        if self.everything:
            return f"every connector ({self.source} is empty)"
        parts = []
        if self.connectors:
            parts.append("connectors " + ", ".join(self.connectors))
        if self.labels:
            parts.append("labels " + ", ".join(f"{k}={v}" for k, v in self.labels))
        return " or ".join(parts) + f" ({self.source})"


def scope_of(
    remediation: RemediationSettings, connect_cluster: str, cluster: ConnectCluster | None
) -> Scope:
    """The scope of one Connect cluster: its own `scope` if set, else `remediation.scope`."""
    if cluster is not None and cluster.scope is not None:
        return Scope.of(cluster.scope, f"connect_clusters.{connect_cluster}.scope")
    return Scope.of(remediation.scope, "remediation.scope")


def labels_of(config: Mapping[str, object]) -> dict[str, str]:
    """The labels in a connector config: `offsetd.label.<key>=<value>` -> {key: value}."""
    return {
        str(key)[len(LABEL_PREFIX) :]: str(value)
        for key, value in config.items()
        if str(key).startswith(LABEL_PREFIX) and len(str(key)) > len(LABEL_PREFIX)
    }


def split_owner_key(key: str) -> tuple[str, str]:
    """`<connect-cluster>/<connector>` (the daemon's re-keying key) -> (cluster, connector).

    Aliases never contain `/`; connector names may."""
    cluster, _, connector = key.partition("/")
    return cluster, connector
