"""Dropping provably dead members from the workers' consumer group before this worker joins it.

A worker killed without leaving the group (SIGKILL, OOM kill) stays a member until its session
timeout passes (`daemon.group_session_timeout`, 60 s): a restarted worker's join waits for it,
and faust starts nothing of the worker until it has joined — no decision, no /metrics, and a
SIGTERM in that time hangs in the pending join. Each worker's Kafka client id names its liveness
beacon (`client_id`, from its owner identity: `offsetd.remediation.sagas.hold_beacon`). A member
whose beacon is provably free (`owner_is_dead`: the same host and network namespace, and no live
process holds it) is sent the LeaveGroup it would have sent itself at a clean shutdown. Any other
member — alive, elsewhere, another program — is left to the group's own timeout.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

# aiokafka: faust's own Kafka client (a dependency of faust-streaming)
from aiokafka.client import AIOKafkaClient, CoordinationType  # type: ignore[import-untyped]
from aiokafka.errors import KafkaError  # type: ignore[import-untyped]
from aiokafka.protocol.admin import DescribeGroupsRequest  # type: ignore[import-untyped]
from aiokafka.protocol.group import LeaveGroupRequest  # type: ignore[import-untyped]

from offsetd.remediation.sagas import beacon_of, owner_is_dead

__all__ = ["client_id", "evict_dead_members", "owner_of"]

log = logging.getLogger("offsetd.remediation")
_CLIENT_ID = re.compile(r"offsetd-(?P<nonce>[0-9a-f]{16})-(?P<boot>[0-9a-f-]{36})-(?P<net>[0-9]+)")


def client_id(owner: str) -> str:
    """The Kafka client id of a worker: `offsetd-<nonce>-<boot id>-<netns inode>` of its beacon
    (Kafka's safe characters only), or plain `offsetd` when it has none."""
    beacon = beacon_of(owner)
    return "offsetd" if beacon is None else "offsetd-{}-{}-{}".format(*beacon)


def owner_of(member_client_id: str) -> str | None:
    """The owner tag a member's client id stands for (what `owner_is_dead` reads), if any."""
    found = _CLIENT_ID.fullmatch(member_client_id)
    if found is None:
        return None
    return f"#{found['nonce']} on {found['boot']}/net:[{found['net']}]"


async def evict_dead_members(
    group: str, bootstrap_servers: str, auth: Mapping[str, Any], timeout_s: float = 10.0
) -> list[str]:
    """Send LeaveGroup for each member of `group` whose beacon is provably free; the member ids
    sent. Never raises: whatever fails leaves the group's timeout to do it."""
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap_servers, client_id="offsetd-evict", **dict(auth)
    )
    try:
        return await asyncio.wait_for(_evict(client, group), timeout_s)
    except (KafkaError, OSError, TimeoutError) as exc:
        log.warning("could not look for dead members of group %s: %r", group, exc)
        return []
    finally:
        await client.close()


async def _evict(client: AIOKafkaClient, group: str) -> list[str]:
    await client.bootstrap()
    node = await client.coordinator_lookup(CoordinationType.GROUP, group)
    described = await client.send(node, DescribeGroupsRequest([group]))
    evicted: list[str] = []
    for found in described.groups:
        members = found[5]  # (member_id, client_id, client_host, metadata, assignment), v0-v3
        for member in members:
            member_id, member_client = str(member[0]), str(member[1])
            owner = owner_of(member_client)
            if owner is None or not owner_is_dead(owner):
                continue
            answer = await client.send(node, LeaveGroupRequest(group, member_id))
            log.warning(
                "group %s: member %s (%s) ended without leaving; removed it (error code %s)",
                group,
                member_id,
                member_client,
                answer.error_code,
            )
            evicted.append(member_id)
    return evicted
