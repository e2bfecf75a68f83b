"""The entry point of locating: the DLQ's coordinates, else one-record batches, else the rule's
check, in that order (the package's docstring); and pinning a `latest` sink's start before a
restart, with the same sink view."""

from __future__ import annotations

from collections.abc import Mapping

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.engine.decision import Decision
from offsetd.offsets.location import resolve_location, worker_view
from offsetd.offsets.model import ConnectorKind, connector_kind
from offsetd.remediation.locate.batches import by_single_record_batches
from offsetd.remediation.locate.check import by_check
from offsetd.remediation.locate.model import (
    Check,
    Located,
    LocateResult,
    NotLocated,
    OverrideHook,
    failed_tasks,
)
from offsetd.remediation.locate.sink import SinkLocator
from offsetd.remediation.locate.source import source_config
from offsetd.remediation.locate.starts import Starts
from offsetd.remediation.sink_start import StartNotPinned, effective_reset
from offsetd.remediation.status_trail import StatusTrail

__all__ = ["locate", "locator_for", "pin_latest_start"]


async def locate(
    client: ConnectClient,
    decision: Decision,
    settings: Settings,
    *,
    check: Check | None = None,
    single_record_batches: bool = True,
    timeout_s: float | None = None,
    on_override: OverrideHook | None = None,
    poll_s: float = 0.1,
    read_timeout_s: float = 30.0,
    settle_s: float = 20.0,
) -> LocateResult:
    """Locate the failing record of `decision`'s connector (see the module docstring).

    `on_override(original_value)` is awaited right before the one-record override is written,
    with the connector's own `consumer.override.max.poll.records` (None: not set), so the caller
    can persist it and `restore_override` after a crash. `timeout_s` (default
    `remediation.locate_timeout`) bounds the wait for the failure to repeat. `settle_s` bounds
    the wait for a FAILED task first: Connect writes the DLQ record about 0.5 s before it reports
    the task FAILED, and a decision made on the DLQ record gets here in between.
    """
    if decision.record_status == "exact" and decision.record is not None:
        return Located(decision.record, "dlq", "named by the DLQ record's context headers")
    name = decision.connector
    info = await client.info(name)
    if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
        return NotLocated(
            "not_a_sink",
            f"{name} is a {info.type} connector ({info.connector_class}): only sink tasks have a "
            "consumer group whose committed offset points at the failed batch",
        )
    if timeout_s is None:
        timeout_s = settings.remediation.locate_timeout / 1000
    locator = locator_for(client, decision, info.config, settings, read_timeout_s, poll_s)
    locator.settle_s = settle_s
    earlier: tuple[NotLocated, ...] = ()
    if single_record_batches:
        result = await by_single_record_batches(locator, timeout_s, on_override)
        if isinstance(result, Located) or check is None:
            return result
        earlier = (result,)
    if check is None:
        return NotLocated(
            "no_method",
            "the decision names no record (no DLQ context), one-record batches are off and the "
            "rule supplies no check",
        )
    result = await by_check(locator, check)
    if isinstance(result, NotLocated):
        return NotLocated(result.reason, result.detail, earlier)
    return result


def locator_for(
    client: ConnectClient,
    decision: Decision,
    config: Mapping[str, str],
    settings: Settings,
    read_timeout_s: float,
    poll_s: float,
) -> SinkLocator:
    """The locator of a sink: its data cluster, its status trail, its consumer's starts."""
    name = decision.connector
    conf = source_config(settings, decision.connect_cluster, name, config)
    connect = settings.connect_clusters.get(decision.connect_cluster)
    internal = settings.kafka_clusters.get(connect.kafka_cluster) if connect else None
    trail = (
        StatusTrail(internal.client_config(), connect.status_topic, name)
        if connect is not None and internal is not None
        else None
    )
    worker = worker_view(settings, decision.connect_cluster)
    starts = Starts(
        conf,
        resolve_location(name, config, ConnectorKind.SINK, worker).sink_group or f"connect-{name}",
        connect.consumer_auto_offset_reset if connect is not None else "earliest",
        (internal.client_config(), connect.status_topic)
        if connect is not None and internal is not None
        else None,
        name,
        read_timeout_s,
    )
    return SinkLocator(client, name, conf, read_timeout_s, poll_s, trail, starts=starts)


async def pin_latest_start(
    client: ConnectClient, decision: Decision, settings: Settings, read_timeout_s: float = 30.0
) -> str | None:
    """Before restarting the failed tasks of a sink whose consumer starts at `latest`: commit
    its start on every partition with records and nothing committed (`sink_start`), so the
    restart does not begin at the log end, past the failed record and everything written since.
    Returns the sentence for the audit (None: nothing to pin). Raises OffsetdError when the
    start cannot be committed."""
    info = await client.info(decision.connector)
    if connector_kind(info.connector_class, info.type) is not ConnectorKind.SINK:
        return None
    connect = settings.connect_clusters.get(decision.connect_cluster)
    worker_reset = connect.consumer_auto_offset_reset if connect is not None else "earliest"
    if effective_reset(info.config, worker_reset) != "latest":
        return None
    failed = failed_tasks(await client.status(decision.connector))
    if not failed:
        return None
    locator = locator_for(client, decision, info.config, settings, read_timeout_s, 0.1)
    pinned = await locator.pin_unstarted(failed, info.config)
    if isinstance(pinned, NotLocated):
        raise StartNotPinned(pinned.detail)
    if not pinned:
        return None
    return "pinned where its consumer starts before restarting: " + "; ".join(
        f"{t}-{p} at {s.offset} ({s.how})" for (t, p), s in sorted(pinned.items())
    )
