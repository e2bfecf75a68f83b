"""What locating answers, and the small readings every way of locating shares.

`Located` names the record and how; `NotLocated` says why not (every way tried, in order);
`LocateAnswer` is what the skip acts on. Kept apart so each way of locating
(`batches`, `check`, the DLQ's coordinates in `find`) speaks the same vocabulary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from offsetd.connect.client import ConnectorState
from offsetd.errors import OffsetdError
from offsetd.events.models import RecordRef
from offsetd.offsets.model import OffsetEntry
from offsetd.recordchecks import KeyMatches, NotJson, TooLarge, ValueMatches

__all__ = [
    "Check",
    "ConfigNotRestored",
    "How",
    "LocateAnswer",
    "LocateResult",
    "Located",
    "NotLocated",
    "NotLocatedReason",
    "OverrideHook",
    "committed_by_partition",
    "failed_tasks",
    "not_failed",
    "partition_names",
]

How = Literal["dlq", "single_record_batches", "check"]
NotLocatedReason = Literal[
    "not_a_sink",  # MirrorSource and other sources: no consumer group, no DLQ
    "not_failed",  # no task is FAILED (any more)
    "override_not_allowed",  # the worker's connector.client.config.override.policy refuses it
    "config_rejected",  # Connect refused the one-record config for another reason
    "failure_did_not_repeat",  # no task failed again within locate_timeout
    "no_committed_offset",  # the failing partition has no committed offset
    "ambiguous_partition",  # several partitions still have records the task may have failed on
    "no_pending_record",  # every partition is committed to its end: nothing left to fail on
    "offset_moved_back",  # the committed offset went below where it was: someone else acts
    "record_unavailable",  # the record at the committed offset cannot be read
    "undelivered_prefix",  # the check names a record after C: records before it never delivered
    "check_passed",  # the records after C all pass the check: it does not explain the failure
    "no_method",  # no DLQ record, one-record batches off, and no check supplied
]
Check = NotJson | ValueMatches | KeyMatches | TooLarge
OverrideHook = Callable[[str | None], Awaitable[None]]


@dataclass(frozen=True)
class Located:
    """The failing record, and which method named it; `delivered`: records of its partition
    the task delivered one by one while it was located (proof that the connector's current
    configuration handles some records: `offsetd.remediation.poison_run`)."""

    record: RecordRef
    how: How
    detail: str = ""
    delivered: int = 0


@dataclass(frozen=True)
class NotLocated:
    """Why the record could not be named exactly; `earlier` holds the methods tried before."""

    reason: NotLocatedReason
    detail: str
    earlier: tuple[NotLocated, ...] = ()

    def describe(self) -> str:
        parts = [f"{n.reason}: {n.detail}" for n in (*self.earlier, self)]
        return "; then ".join(parts)


LocateResult = Located | NotLocated


@dataclass(frozen=True)
class LocateAnswer:
    """What a skip acts on: the record (None: not located, `how` is the reason), how it was
    found, the sentence for the audit, the records delivered while locating it, and whether the
    connector's current configuration is known to handle records (`config_proof`)."""

    record: dict[str, int | str] | None
    how: str
    why: str
    delivered: int = 0
    proof: str | None = None  # why the configuration is known to work; None: no proof
    no_proof: str = ""  # why there is none


class ConfigNotRestored(OffsetdError):
    """The connector's original config could not be put back after one-record batches."""

    exit_code = 41


def committed_by_partition(entries: list[OffsetEntry]) -> dict[tuple[str, int], int]:
    """A sink's committed offsets (next to read) by (topic, partition)."""
    out: dict[tuple[str, int], int] = {}
    for entry in entries:
        if entry.offset is None or "kafka_topic" not in entry.partition:
            continue
        topic = str(entry.partition["kafka_topic"])
        partition = int(str(entry.partition["kafka_partition"]))
        out[(topic, partition)] = int(str(entry.offset["kafka_offset"]))
    return out


def partition_names(tps: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)


def failed_tasks(status: ConnectorState) -> frozenset[int]:
    return frozenset(t.id for t in status.tasks if t.state == "FAILED")


def not_failed(status: ConnectorState) -> NotLocated:
    states = ", ".join(f"{t.id}={t.state}" for t in status.tasks) or "none"
    return NotLocated(
        "not_failed", f"{status.name} has no FAILED task (connector {status.state}, tasks {states})"
    )
