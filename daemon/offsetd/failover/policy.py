"""MM2's replication policies as offsetd needs them: a topic's name on the other cluster.

`DefaultReplicationPolicy` renames a replicated topic to `<source alias><separator><topic>` and
can tell where a remote topic came from (the prefix); `IdentityReplicationPolicy` keeps names,
so a topic's origin is not in its name. Internal topic names (checkpoints, offset syncs) follow
the default policy for both, with the separator unless
`replication.policy.internal.topic.separator.enabled=false`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["PolicyKind", "ReplicationPolicy", "policy_of_config"]

PolicyKind = Literal["default", "identity"]

_CLASSES: dict[str, PolicyKind] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "default",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}


@dataclass(frozen=True)
class ReplicationPolicy:
    kind: PolicyKind = "default"
    separator: str = "."
    internal_separator: bool = True

    def remote_topic(self, source_alias: str, topic: str) -> str:
        """The name `topic` of `source_alias` has on the target cluster."""
        if self.kind == "identity":
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def origin(self, topic: str) -> tuple[str, str] | None:
        """(source alias, original topic) of a remote topic; None when the name cannot tell."""
        if self.kind == "identity":
            return None
        alias, sep, rest = topic.partition(self.separator)
        return (alias, rest) if sep and alias and rest else None

    def _internal(self) -> str:
        return self.separator if self.internal_separator else "."

    def checkpoints_topic(self, source_alias: str) -> str:
        """`<source>.checkpoints.internal`, on the target cluster."""
        return f"{source_alias}{self._internal()}checkpoints{self._internal()}internal"

    def offset_syncs_topic(self, alias: str) -> str:
        """`mm2-offset-syncs.<alias>.internal`: the target alias when the topic lives on the
        source cluster (MM2's default), the source alias when it lives on the target."""
        sep = self._internal()
        return f"mm2-offset-syncs{sep}{alias}{sep}internal"


def policy_of_config(config: dict[str, str]) -> ReplicationPolicy:
    """The policy an MM2 connector's config names (ValueError for a class offsetd cannot follow)."""
    name = config.get(
        "replication.policy.class", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    )
    kind = _CLASSES.get(name)
    if kind is None:
        raise ValueError(
            f"replication.policy.class {name} is not one offsetd can follow (the default or the "
            "identity policy): pass --policy default|identity if it names topics like one of them"
        )
    internal = config.get("replication.policy.internal.topic.separator.enabled", "true")
    return ReplicationPolicy(
        kind,
        config.get("replication.policy.separator", "."),
        internal.strip().lower() != "false",
    )
