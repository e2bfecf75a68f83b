"""The pure part of a rewind plan: ranges, per-partition results, modes, document and summary.

Everything here is plain Python with no Spark and no I/O except reading and writing the plan
files, so the arithmetic (the part that decides where a connector restarts) is unit-tested alone.

Offsets are "next offset to read" throughout; `offset_for_next` from the offsets toolkit turns
them into the connector's own convention at the very end (sink `kafka_offset` = N,
MirrorSourceConnector `offset` = N-1, or null for N = 0).

A partition whose target is where the connector already is counts as unchanged, in the summary
and in the document: a target equal to the committed next offset, or (MirrorSourceConnector) a
target of 0 for a partition with no offset, which both mean "start at the log start".

A plan is two files: `plan.json`, an ordinary offsets document (`{"<connector>": [...]}`) that
`offsetd offsets import` reads unchanged, and `plan.summary.json` beside it, which says how the
document was computed and carries the document's hash so the two cannot drift apart.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offsetd.errors import InvalidDocument, OffsetdError
from offsetd.offsets import documents
from offsetd.offsets.model import ConnectorKind, OffsetEntry, offset_for_next
from offsetd.offsets.targets import partition_map_for

__all__ = [
    "PLAN_FORMAT",
    "Decision",
    "Mode",
    "PartitionRange",
    "PartitionScan",
    "Request",
    "RewindPlan",
    "SkipRunRefused",
    "build_plan",
    "decide",
    "document_hash",
    "load_plan",
    "nothing_to_rewind",
    "render_summary",
    "summary_path",
    "write_plan",
]

PLAN_FORMAT = "offsetd.rewind-plan/1"


class SkipRunRefused(OffsetdError):
    """skip-run's matches are not one run from the committed offset (exit 26).

    It lives with the plan that decides it; `offsetd.spark.errors` hands it on with the
    other errors of a rewind plan."""

    exit_code = 26


class Mode(enum.StrEnum):
    """Where a partition restarts, given the records that match the predicate."""

    FIRST_MATCH = "first-match"  # at the first matching record (re-deliver from it)
    AFTER_LAST_MATCH = "after-last-match"  # just past the last matching record
    SKIP_RUN = "skip-run"  # past one run of matches that starts at the committed offset


@dataclass(frozen=True)
class PartitionRange:
    """The offsets [start, end) to scan in one partition, and what it held when resolved."""

    topic: str
    partition: int
    start: int
    end: int
    committed: int | None = None  # the connector's next offset, None when it has none

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


@dataclass(frozen=True)
class PartitionScan:
    """What the scan found in one partition (offsets of records that exist in the range)."""

    topic: str
    partition: int
    scanned: int = 0
    matched: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    first_match: int | None = None
    last_match: int | None = None
    first_miss: int | None = None  # first record that does not match (NULL counts as no match)
    min_timestamp: int | None = None  # epoch ms
    max_timestamp: int | None = None


@dataclass(frozen=True)
class Decision:
    range: PartitionRange
    scan: PartitionScan
    next_offset: int | None  # None: unchanged
    reason: str
    run: tuple[int, int] | None = None  # skip-run: first and last offset of the skipped run

    @property
    def changed(self) -> bool:
        return self.next_offset is not None


def decide(
    mode: Mode, ranges: Sequence[PartitionRange], scans: Mapping[tuple[str, int], PartitionScan]
) -> list[Decision]:
    """One decision per range; skip-run refuses the whole plan if any partition cannot skip."""
    decisions = []
    refusals = []
    for rng in ranges:
        scan = scans.get((rng.topic, rng.partition), PartitionScan(rng.topic, rng.partition))
        try:
            decision = _decide_one(mode, rng, scan)
        except _Refused as exc:
            refusals.append(f"{rng.topic}-{rng.partition}: {exc}")
            continue
        if decision.next_offset is not None and decision.next_offset == rng.committed:
            decision = _unchanged(decision, f"the connector is already at {rng.committed}")
        decisions.append(decision)
    if refusals:
        raise SkipRunRefused(
            "skip-run applies only when the matches on a partition form one contiguous run "
            "starting at the committed offset; a non-contiguous set needs a filter transform "
            "or a republish, not offsets:\n  " + "\n  ".join(refusals)
        )
    return decisions


class _Refused(Exception):
    pass


def _unchanged(decision: Decision, why: str) -> Decision:
    """The decision, kept as a reason, for a partition that would not move."""
    return replace(decision, next_offset=None, reason=f"{decision.reason}; {why}: unchanged")


def _decide_one(mode: Mode, rng: PartitionRange, scan: PartitionScan) -> Decision:
    if rng.size == 0:
        return Decision(rng, scan, None, "nothing to scan in the range: unchanged")
    if scan.matched == 0 or scan.first_match is None or scan.last_match is None:
        return Decision(rng, scan, None, "no record matched: unchanged")
    committed = rng.committed
    if mode is Mode.FIRST_MATCH:
        if committed is not None and scan.first_match >= committed:
            # Not a rewind: moving there would skip records the connector never delivered, and
            # it will deliver the first match anyway.
            return Decision(
                rng,
                scan,
                None,
                f"first match at {scan.first_match} is not delivered yet (the connector is at "
                f"{committed}): unchanged",
            )
        return Decision(rng, scan, scan.first_match, f"first match at {scan.first_match}")
    if mode is Mode.AFTER_LAST_MATCH:
        target = scan.last_match + 1
        reason = f"last match at {scan.last_match}"
        if committed is not None and target > committed:
            reason += (
                f"; moves forward from {committed}: skips {target - committed} offsets the "
                "connector has not delivered, the records before the first match included"
            )
        return Decision(rng, scan, target, reason)
    # skip-run: the first scanned record (the one at the committed offset) must match, and no
    # non-matching record may lie before the last match.
    if scan.first_match != scan.first_offset:
        raise _Refused(
            f"the record at the committed position ({scan.first_offset}) does not match; "
            f"the first match is at {scan.first_match}"
        )
    if scan.first_miss is not None and scan.first_miss < scan.last_match:
        raise _Refused(
            f"matches {scan.first_match}..{scan.last_match} are not contiguous: offset "
            f"{scan.first_miss} does not match"
        )
    return Decision(
        rng,
        scan,
        scan.last_match + 1,
        f"skips the run {scan.first_match}..{scan.last_match} ({scan.matched} records)",
        run=(scan.first_match, scan.last_match),
    )


# -- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What was asked, as recorded in the summary (never credentials)."""

    connector: str
    kind: ConnectorKind
    predicate: str
    mode: Mode
    cluster: str
    source_alias: str = "source"
    value_schema: str | None = None
    from_timestamp: int | None = None
    to_timestamp: int | None = None


@dataclass(frozen=True)
class RewindPlan:
    connector: str
    entries: list[OffsetEntry]
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def document(self) -> dict[str, Any]:
        return documents.export_document({self.connector: self.entries})


def build_plan(
    request: Request, decisions: Sequence[Decision], elapsed_s: float | None = None
) -> RewindPlan:
    """The offsets document (changed partitions only: PATCH keeps the others) and its summary."""
    decisions = [_settled(request.kind, d) for d in decisions]
    entries = [
        OffsetEntry(
            partition_map_for(
                request.kind, (d.range.topic, d.range.partition), request.source_alias
            ),
            offset_for_next(request.kind, d.next_offset),
        )
        for d in decisions
        if d.next_offset is not None
    ]
    plan = RewindPlan(request.connector, entries)
    summary = _summary(request, decisions, elapsed_s, document_hash(plan.document))
    return RewindPlan(request.connector, entries, summary)


def _settled(kind: ConnectorKind, d: Decision) -> Decision:
    """Unchanged when the target, in the connector's own convention, is what it stores now.

    `decide` already compares next offsets; what it cannot know is the kind: a
    MirrorSourceConnector with no offset for a partition and a target of 0 both store nothing
    (null), and PATCHing null there would remove a partition that is not there."""
    if d.next_offset is None or d.range.committed is not None:
        return d
    if offset_for_next(kind, d.next_offset) is None:
        return _unchanged(d, "the connector has no offset there and starts at the log start")
    return d


def document_hash(document: Mapping[str, Any]) -> str:
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat()


def _summary(
    request: Request, decisions: Sequence[Decision], elapsed_s: float | None, digest: str
) -> dict[str, Any]:
    scanned = sum(d.scan.scanned for d in decisions)
    stamps = [t for d in decisions for t in (d.scan.min_timestamp, d.scan.max_timestamp) if t]
    return {
        "format": PLAN_FORMAT,
        "connector": request.connector,
        "connector_kind": str(request.kind),
        "cluster": request.cluster,
        "predicate": request.predicate,
        "mode": str(request.mode),
        "value_schema": request.value_schema,
        "from_timestamp": _iso(request.from_timestamp),
        "to_timestamp": _iso(request.to_timestamp),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "document_sha256": digest,
        "totals": {
            "partitions": len(decisions),
            "scanned": scanned,
            "matched": sum(d.scan.matched for d in decisions),
            "changed": sum(1 for d in decisions if d.changed),
            "unchanged": sum(1 for d in decisions if not d.changed),
            "elapsed_s": None if elapsed_s is None else round(elapsed_s, 3),
            "records_per_s": (round(scanned / elapsed_s) if elapsed_s and elapsed_s > 0 else None),
        },
        "time_range": {
            "first": _iso(min(stamps, default=None)),
            "last": _iso(max(stamps, default=None)),
        },
        "partitions": [_partition_json(d) for d in decisions],
    }


def _partition_json(d: Decision) -> dict[str, Any]:
    return {
        "topic": d.range.topic,
        "partition": d.range.partition,
        "range": [d.range.start, d.range.end],
        "committed": d.range.committed,
        "scanned": d.scan.scanned,
        "matched": d.scan.matched,
        "first_match": d.scan.first_match,
        "last_match": d.scan.last_match,
        "next_offset": d.next_offset,
        "status": "changed" if d.changed else "unchanged",
        "reason": d.reason,
        "skipped_run": None if d.run is None else {"first": d.run[0], "last": d.run[1]},
        "time_range": {"first": _iso(d.scan.min_timestamp), "last": _iso(d.scan.max_timestamp)},
    }


def nothing_to_rewind(plan: RewindPlan, text: str, partitions: int) -> str:
    """Why a plan without entries is not written: nothing matched, or every partition is
    already where the mode would put it (each named with its reason, as in the summary)."""
    totals = plan.summary["totals"]
    where = f"{totals['scanned']:,} records of {partitions} partitions of {plan.connector}"
    if not totals["matched"]:
        return f"no record matched {text!r} in {where}: nothing to rewind, no plan written"
    reasons = [
        f"{p['topic']}-{p['partition']}: {p['reason']}"
        for p in plan.summary["partitions"]
        if p["matched"]
    ]
    return (
        f"{totals['matched']:,} records matched {text!r} in {where}, but no partition would "
        "change: nothing to rewind, no plan written\n  " + "\n  ".join(reasons)
    )


# -- files --------------------------------------------------------------------------------------


def summary_path(plan_path: Path) -> Path:
    """`plan.json` -> `plan.summary.json` (next to it)."""
    return plan_path.with_name(plan_path.stem + ".summary.json")


def write_plan(plan: RewindPlan, out: Path) -> Path:
    """Write the document and its summary; returns the summary's path."""
    out.write_text(json.dumps(plan.document, indent=2) + "\n")
    side = summary_path(out)
    side.write_text(json.dumps(plan.summary, indent=2) + "\n")
    return side


def load_plan(path: Path | str) -> RewindPlan:
    """Read a plan written by `offsetd rewind plan`: validated entries and the summary.

    For the daemon's `rewind` action: the entries go to the offsets toolkit as a patch
    (`StepwiseBackend.plan_alter`); the summary says what was scanned and why.
    """
    path = Path(path)
    side = summary_path(path)
    try:
        text, summary = path.read_text(), json.loads(side.read_text())
    except FileNotFoundError as exc:
        raise InvalidDocument(f"rewind plan incomplete: {exc.filename} is missing") from None
    except ValueError:
        raise InvalidDocument(f"{side} is not JSON") from None
    if not isinstance(summary, dict) or summary.get("format") != PLAN_FORMAT:
        raise InvalidDocument(f"{side} is not a rewind plan summary ({PLAN_FORMAT})")
    raw = documents.parse_document(text)
    connector = str(summary.get("connector"))
    if set(raw) != {connector}:
        raise InvalidDocument(f"{path} is not the plan of {connector} that {side} describes")
    if document_hash(raw) != summary.get("document_sha256"):
        raise InvalidDocument(f"{path} was changed after it was computed (hash mismatch)")
    kind = ConnectorKind(summary["connector_kind"])
    entries = documents.validate_entries(connector, kind, raw[connector])
    return RewindPlan(connector, entries, summary)


def render_summary(summary: Mapping[str, Any]) -> str:
    """A readable summary for people: totals, then one line per partition."""
    totals = summary["totals"]
    head = [
        f"rewind plan for {summary['connector']} ({summary['mode']}): "
        + _change_count(totals["changed"], totals["unchanged"]),
        f"predicate: {summary['predicate']}",
        f"scanned {totals['scanned']:,} records, {totals['matched']:,} matched"
        + (f", {totals['records_per_s']:,} records/s" if totals.get("records_per_s") else ""),
        f"records' time range: {summary['time_range']['first']} .. {summary['time_range']['last']}",
    ]
    rows = [_row(p) for p in summary["partitions"]]
    return "\n".join([*head, "", *_align(rows)])


def _change_count(changed: int, unchanged: int) -> str:
    if changed == 1:
        return f"1 partition changes, {unchanged} unchanged"
    return f"{changed} partitions change, {unchanged} unchanged"


def _row(p: Mapping[str, Any]) -> list[str]:
    return [
        f"{p['topic']}-{p['partition']}",
        f"[{p['range'][0]}, {p['range'][1]})",
        str(p["scanned"]),
        str(p["matched"]),
        "-" if p["next_offset"] is None else str(p["next_offset"]),
        p["reason"],
    ]


def _align(rows: Iterable[list[str]]) -> list[str]:
    table = [["PARTITION", "RANGE", "SCANNED", "MATCHED", "NEXT", "WHY"], *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
