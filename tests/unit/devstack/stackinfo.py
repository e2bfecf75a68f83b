"""A `StackInfo` as a secure stack describes itself, for the tests of what it writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from offsetd.devstack.stack import StackInfo

__all__ = ["secure_stack_info"]


def secure_stack_info(
    run_dir: Path, security: dict[str, Any], clusters: dict[str, dict[str, str]] | None = None
) -> StackInfo:
    """Two clusters (east, west), Connect over HTTPS on west, and `security` as `stack.json`
    has it."""
    return StackInfo(
        run_dir=str(run_dir),
        clusters=clusters
        or {
            "east": {"bootstrap.servers": "127.0.0.1:1", "cluster.id": "a"},
            "west": {"bootstrap.servers": "127.0.0.1:2", "cluster.id": "b"},
        },
        connect={
            "url": "https://127.0.0.1:5",
            "kafka_cluster": "west",
            "group.id": "connect-cluster",
            "offset.storage.topic": "connect-offsets",
            "config.storage.topic": "connect-configs",
            "status.storage.topic": "connect-status",
        },
        mm2={},
        security=security,
    )
