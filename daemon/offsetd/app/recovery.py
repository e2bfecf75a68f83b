"""Resuming unfinished sagas when the daemon starts, as early as it is safe to.

At once for those whose owner provably ended (a daemon killed and restarted in place), the others
once this worker owns partitions of its events topic (`Remediator.start`). Started as a faust
Service that is the app's first dependency, not as an `@app.task`: faust starts those only after
the group has assigned partitions and the tables are recovered, which after a SIGKILL waits out
the dead member's whole session timeout (~1 minute). Before the app's consumer starts, it also
removes the group's provably dead members, so that the join does not wait for them either.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.exceptions import ConsumerNotStarted

from offsetd.app.broker import aiokafka_auth
from offsetd.app.wiring import Wiring
from offsetd.events.models import owner_key
from offsetd.offsets.offline.javahash import murmur2
from offsetd.remediation.dead_members import evict_dead_members
from offsetd.remediation.executor import Remediator

__all__ = ["remediation_start"]

_ASSIGNMENT_POLLS = 240  # at 0.5 s: at most 2 minutes once the consumer runs


async def _owned_partitions(app: faust.App, events_name: str, owned: set[int]) -> None:
    """Until this worker owns events partitions (at most 2 minutes once its consumer runs: a
    worker may be given none); `owned` is filled in place."""
    polls = 0
    while polls < _ASSIGNMENT_POLLS:
        try:
            tps = app.consumer.assignment()
        except ConsumerNotStarted:  # this starts with the app, before its consumer
            tps = set()
        else:
            polls += 1
        owned.update(tp.partition for tp in tps if tp.topic == events_name)
        if owned:
            return
        await asyncio.sleep(0.5)


async def _start_remediation(
    app: faust.App, remediator: Remediator, events_topic: Any, partitions: int
) -> None:
    events_name = events_topic.get_topic_name()
    owned: set[int] = set()

    def owns(connect_cluster: str, connector: str) -> bool:
        key = owner_key(connect_cluster, connector).encode()
        return (murmur2(key) & 0x7FFFFFFF) % partitions in owned

    await remediator.start(owns, _owned_partitions(app, events_name, owned))


def remediation_start(app: faust.App, wiring: Wiring, events_topic: Any) -> faust.Service:
    """The service to add as the app's first dependency (see the module docstring)."""
    remediator = wiring.remediator

    class RemediationStart(faust.Service):
        async def on_start(self) -> None:
            if self.restart_count:  # once per process, as an @app.task
                return
            if remediator is not None:
                self.add_future(
                    _start_remediation(
                        app, remediator, events_topic, wiring.settings.daemon.partitions
                    )
                )
            await evict_dead_members(
                app.conf.id,  # the consumer group
                wiring.kafka.bootstrap_servers,
                aiokafka_auth(wiring.kafka),
            )

        async def on_stop(self) -> None:
            # the Kubernetes Events still queued get a few seconds (a shutdown must not hang)
            if remediator is not None and remediator.events is not None:
                await remediator.events.close()

    return RemediationStart()
