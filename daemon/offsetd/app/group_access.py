"""May this principal join the daemon's consumer groups? Asked before the daemon starts.

Without READ on its group, faust's consumer (aiokafka) retries the join in silence and the worker
never starts: no log line, no probe, `/readyz` forever "not checked yet". A preflight cannot
simply join (another replica would be rebalanced) or commit (it would move the group). A
Heartbeat from a member that does not exist can do neither: the broker authorizes it (READ on the
group) before it looks for the member, so it answers GROUP_AUTHORIZATION_FAILED to a principal
without the ACL and UNKNOWN_MEMBER_ID (or similar) to one with it, and changes nothing. Finding
the group's coordinator needs DESCRIBE on the group, which READ implies; a refusal there is the
same missing ACL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka.client import AIOKafkaClient, CoordinationType  # type: ignore[import-untyped]
from aiokafka.errors import GroupAuthorizationFailedError  # type: ignore[import-untyped]
from aiokafka.protocol.group import HeartbeatRequest  # type: ignore[import-untyped]

from offsetd.config import Settings

__all__ = ["GROUP_AUTHORIZATION_FAILED", "daemon_groups", "ingest_group", "refused_groups"]

GROUP_AUTHORIZATION_FAILED = 30  # Kafka's error code
_NO_SUCH_MEMBER = "offsetd-access-probe"


def ingest_group(app_id: str) -> str:
    return f"{app_id}-ingest"


def daemon_groups(settings: Settings) -> list[str]:
    """The consumer groups `offsetd run` joins: faust's (the app id) and the ingest's."""
    app_id = settings.daemon.app_id
    return [app_id, ingest_group(app_id)]


async def refused_groups(
    groups: Sequence[str],
    bootstrap_servers: str,
    auth: Mapping[str, Any],
    timeout_s: float = 10.0,
) -> list[str]:
    """The groups among `groups` whose READ the brokers refuse this principal."""
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap_servers, client_id="offsetd-access-probe", **dict(auth)
    )
    try:
        return await asyncio.wait_for(_refused(client, groups), timeout_s)
    finally:
        await client.close()


async def _refused(client: AIOKafkaClient, groups: Sequence[str]) -> list[str]:
    await client.bootstrap()
    refused: list[str] = []
    for group in groups:
        try:
            node = await client.coordinator_lookup(CoordinationType.GROUP, group)
        except GroupAuthorizationFailedError:
            refused.append(group)
            continue
        answer = await client.send(node, HeartbeatRequest(group, -1, _NO_SUCH_MEMBER))
        if answer.error_code == GROUP_AUTHORIZATION_FAILED:
            refused.append(group)
    return refused
