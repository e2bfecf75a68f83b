"""What the guards read before a decision may act: the connector's class, the blast radius.

Reads, never writes; each is asked again when Connect does not answer (the decision that needs
it comes only once: one lost answer would leave a connector FAILED for good), and a guard that
still cannot read fails closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from offsetd.config import ConnectCluster, RemediationSettings
from offsetd.connect.client import ConnectClient
from offsetd.engine import ConnectorMeta, Decision
from offsetd.errors import OffsetdError
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.remediation.guards import StatusSample, failing_now, failing_within
from offsetd.retry import retry_call
from offsetd.scope import labels_of, scope_of

__all__ = ["GuardReads", "GuardReadsHost"]

log = logging.getLogger("offsetd.remediation")
T = TypeVar("T")


class GuardReadsHost(Protocol):
    """The executor's settings and hooks the reads use (read at each call: tests tune them)."""

    settings: RemediationSettings
    metrics: RemediationMetrics
    http_timeout_s: float
    retry_delays_s: tuple[float, ...]

    @property
    def meta(self) -> Callable[[str, str], ConnectorMeta | None]: ...

    @property
    def failures(self) -> Callable[[str, int], list[StatusSample]] | None: ...

    @property
    def now_ms(self) -> Callable[[], int]: ...

    async def again(self, what: str, call: Callable[[], Awaitable[T]]) -> T: ...


class GuardReads:
    def __init__(self, host: GuardReadsHost) -> None:
        self.host = host

    async def meta(
        self, decision: Decision, cluster: ConnectCluster | None
    ) -> ConnectorMeta | None:
        """The connector's class, type and labels: from the cache, else read from Connect now.

        The cache fills from status records, which a daemon started after the connector's
        failure may not have read yet when the DLQ record decides: without this, the
        allowlist would refuse a sink as "an unknown class".
        """
        host = self.host
        meta = host.meta(decision.connect_cluster, decision.connector)
        moves = decision.effects.moves_offsets
        # a scope by labels needs them (offsetd.scope): read them rather than not act
        labelled = bool(scope_of(host.settings, decision.connect_cluster, cluster).labels)
        if meta is not None or cluster is None or not (moves or labelled):
            return meta
        try:
            info = await self.read(
                cluster, f"read {decision.connector}'s class", lambda c: c.info(decision.connector)
            )
        except OffsetdError as exc:
            log.warning("could not read %s's class: %s", decision.connector, exc)
            return None
        return ConnectorMeta(
            connector_class=info.connector_class,
            connector_type=info.type,
            labels=labels_of(info.config),
        )

    async def settle(self, decision: Decision) -> None:
        """Wait until `blast_radius.settle` after the decision's event: connectors failing
        together report FAILED a moment apart, and the first decision must see them all."""
        host = self.host
        settle = host.settings.blast_radius.settle
        wait_ms = min(decision.event_time_ms + settle - host.now_ms(), settle)
        if wait_ms > 0:
            await asyncio.sleep(wait_ms / 1000)

    async def failing_connectors(
        self, name: str, cluster: ConnectCluster
    ) -> tuple[int | None, tuple[str, ...]]:
        """The blast radius's count: connectors of the cluster failing now (REST) or FAILED
        within `blast_radius.within` (the status topic), and their names; None if unreadable."""
        host = self.host
        try:
            expanded = await self.read(cluster, "count failing connectors", lambda c: c.statuses())
        except OffsetdError as exc:
            log.warning("could not count failing connectors: %s", exc)
            return None, ()
        now, within = host.now_ms(), host.settings.blast_radius.within
        samples: list[StatusSample] = []
        if host.failures is not None:
            read = host.failures

            def said(exc: Exception, attempt: int, _delay: float) -> None:
                log.warning("could not read recent failures (%s); try %d", exc, attempt + 2)

            try:  # the status topic: any failure to read it to its end is worth a second look
                samples = await retry_call(
                    lambda: asyncio.to_thread(read, name, now - within),
                    host.retry_delays_s,
                    retriable=lambda exc: isinstance(exc, OffsetdError),
                    before_retry=said,
                )
            except OffsetdError as exc:
                log.warning("could not read recent failures of %s: %s", name, exc)
                return None, ()
        names = failing_within(
            samples, now, within, existing=set(expanded), failing=failing_now(expanded)
        )
        host.metrics.blast_radius_failing.labels(name).set(len(names))
        return len(names), tuple(sorted(names))

    async def read(
        self,
        cluster: ConnectCluster,
        what: str,
        read: Callable[[ConnectClient], Awaitable[T]],
    ) -> T:
        """A read a guard needs, asked again when Connect does not answer."""
        async with ConnectClient.for_cluster(cluster, timeout_s=self.host.http_timeout_s) as client:
            return await self.host.again(what, lambda: read(client))
