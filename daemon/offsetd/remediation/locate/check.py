"""Locating by a rule's check: the record at the committed offset C is the poison record only
if it fails the check (`offsetd.recordchecks`); a first failing record after C means the records
between were never delivered (`undelivered_prefix`), and nothing is located."""

from __future__ import annotations

import asyncio

from offsetd.recordchecks import describe, fails
from offsetd.remediation.locate.model import (
    Check,
    Located,
    LocateResult,
    NotLocated,
    failed_tasks,
    not_failed,
)
from offsetd.remediation.locate.override import max_poll_records
from offsetd.remediation.locate.sink import SinkLocator
from offsetd.remediation.records import RecordUnavailable, read_records
from offsetd.remediation.sink_start import Start

__all__ = ["by_check"]


async def by_check(sink: SinkLocator, check: Check) -> LocateResult:
    """The record at the committed offset, if it fails the rule's check (way 3)."""
    status = await sink.settled_status()
    failed = failed_tasks(status)
    if not failed:
        return not_failed(status)
    config = await sink.client.config(sink.name)
    entries = await sink.client.offsets(sink.name)
    starts: dict[tuple[str, int], Start] = {}
    if sink.starts is not None:
        unstarted = await sink.unstarted(entries, config)
        if isinstance(unstarted, NotLocated):
            return unstarted
        starts = await sink.starts.resolve(unstarted, failed, config)
    picked = await sink.pick(entries, {tp: s.offset for tp, s in starts.items()})
    if isinstance(picked, NotLocated):
        return picked
    ref, committed = picked
    limit = max_poll_records(config)
    isolation = config.get("consumer.override.isolation.level", "read_uncommitted")
    try:
        records = await asyncio.to_thread(
            read_records, sink.conf, ref.topic, ref.partition, committed, limit,
            timeout_s=sink.read_s, isolation_level=isolation,
        )  # fmt: skip
    except RecordUnavailable as exc:
        return NotLocated("record_unavailable", str(exc))
    if not records or records[0].offset != committed:
        return NotLocated(
            "record_unavailable",
            f"there is no record at {ref.topic}-{ref.partition}@{committed} (compacted away, "
            "a transaction marker, or beyond the end)",
        )
    what = describe(check)
    first = next((r for r in records if fails(check, r)), None)
    if first is None:
        return NotLocated(
            "check_passed",
            f"none of the {len(records)} records from {ref.topic}-{ref.partition}@{committed} "
            f"(one batch at most) fails the check ({what}): it does not explain the failure",
        )
    if first.offset != committed:
        return NotLocated(
            "undelivered_prefix",
            f"the first record failing the check ({what}) is at offset {first.offset}, after "
            f"the committed offset {committed}: records {committed}..{first.offset - 1} were "
            "never delivered, and skipping would lose them",
        )
    start = starts.get((ref.topic, ref.partition))
    where = (
        f"the record where the consumer starts ({start.how}) fails the check: {what}"
        if start is not None
        else f"the record at the committed offset fails the check: {what}"
    )
    return Located(ref, "check", where)
