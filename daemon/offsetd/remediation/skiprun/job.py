"""A skip-run plan's job: the runs of matching records it skips, read from the plan's summary
and checked against the document it describes (its hash) and against the connector's position
now; a run is quarantined and skipped only while it still starts where the connector is.

Pure (no Kafka client): what must be copied, and whether it still may be; the copy itself is
`skiprun.copier`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from offsetd.errors import InvalidDocument
from offsetd.offsets.model import ConnectorKind, OffsetEntry, next_offset_of, topic_partition_of
from offsetd.offsets.rewind_plan import PLAN_FORMAT, Mode, RewindPlan, load_plan, summary_path

__all__ = [
    "Coordinates",
    "SkipRunJob",
    "SkippedRun",
    "check_positions",
    "quarantine_context",
    "skip_run_job",
    "skip_run_job_of_file",
]

Coordinates = tuple[str, int, int]


@dataclass(frozen=True)
class SkippedRun:
    """The records [first, last] of one partition that the plan skips (all of them matched)."""

    topic: str
    partition: int
    first: int
    last: int
    records: int  # how many records the scan found in it (fewer than offsets when compacted)
    committed: int | None  # the connector's next offset when the plan was computed

    def describe(self) -> str:
        return f"{self.topic}-{self.partition} {self.first}..{self.last} ({self.records:,} records)"


@dataclass(frozen=True)
class SkipRunJob:
    """What applying one skip-run plan must quarantine first."""

    connector: str
    kind: ConnectorKind
    predicate: str
    document_sha256: str
    runs: tuple[SkippedRun, ...]

    @property
    def key(self) -> str:
        """The key every copy of this plan carries (and the quarantine partition it picks)."""
        return f"skip-run/{self.connector}/{self.document_sha256[:16]}"

    @property
    def records(self) -> int:
        return sum(r.records for r in self.runs)

    def describe(self, limit: int = 20) -> list[str]:
        lines = [r.describe() for r in self.runs[:limit]]
        if len(self.runs) > limit:
            lines.append(f"... and {len(self.runs) - limit} more runs")
        return lines


def skip_run_job(plan: RewindPlan) -> SkipRunJob | None:
    """The runs a loaded skip-run plan skips; None for a plan of another mode.

    Every changed partition of a skip-run plan must have its run in the summary, ending just
    before the partition's new offset, and every run a changed partition: otherwise the summary
    does not describe the document and the plan is refused (nothing is quarantined or patched).
    """
    summary = plan.summary
    if summary.get("mode") != str(Mode.SKIP_RUN):
        return None
    kind = ConnectorKind(summary["connector_kind"])
    runs: list[SkippedRun] = []
    try:
        for row in summary["partitions"]:
            run = row.get("skipped_run")
            if run is None:
                continue
            committed = row.get("committed")
            runs.append(
                SkippedRun(
                    topic=str(row["topic"]),
                    partition=int(row["partition"]),
                    first=int(run["first"]),
                    last=int(run["last"]),
                    records=int(row["matched"]),
                    committed=None if committed is None else int(committed),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidDocument(
            f"the summary of the skip-run plan of {plan.connector} is malformed ({exc!r})"
        ) from None
    targets = {
        topic_partition_of(kind, e.partition): next_offset_of(kind, e.offset) for e in plan.entries
    }
    by_tp = {(r.topic, r.partition): r for r in runs}
    for tp, target in targets.items():
        run_of = by_tp.get(tp)
        if run_of is None or target != run_of.last + 1 or run_of.records < 1:
            raise InvalidDocument(
                f"the skip-run plan of {plan.connector} moves {tp[0]}-{tp[1]} to {target}, but "
                "its summary records no matching run ending just before it: not applied"
            )
    extra = sorted(set(by_tp) - set(targets))
    if extra:
        raise InvalidDocument(
            f"the summary of the skip-run plan of {plan.connector} lists runs the document does "
            f"not skip ({', '.join(f'{t}-{p}' for t, p in extra)}): not applied"
        )
    return SkipRunJob(
        plan.connector,
        kind,
        str(summary.get("predicate", "")),
        str(summary["document_sha256"]),
        tuple(sorted(runs, key=lambda r: (r.topic, r.partition))),
    )


def skip_run_job_of_file(path: Path | str | None) -> SkipRunJob | None:
    """For `offsetd offsets import`: the job of a skip-run plan file, None for anything else.

    A file with no rewind-plan summary beside it, or a plan of another mode, is an ordinary
    offsets document. A skip-run plan is read with `load_plan`, so a document edited after it
    was computed is refused (its runs would not match it).
    """
    if path is None:
        return None
    side = summary_path(Path(path))
    if not side.is_file():
        return None
    try:
        summary = json.loads(side.read_text())
    except (OSError, ValueError) as exc:  # fail closed: it may be a skip-run's summary
        raise InvalidDocument(
            f"{side} (beside {path}) cannot be read ({exc}): if this is a rewind plan, its "
            "summary says whether runs must be quarantined first; not applied"
        ) from None
    if not isinstance(summary, dict) or summary.get("format") != PLAN_FORMAT:
        return None
    if summary.get("mode") != str(Mode.SKIP_RUN):
        return None
    return skip_run_job(load_plan(path))


def check_positions(job: SkipRunJob, current: Sequence[OffsetEntry]) -> None:
    """Each run must still start where the connector is (its offset when the plan was computed,
    or the run's first record), or the plan was applied already (just past the run: applying it
    again copies what is missing and changes nothing). Anywhere else, skipping to the end of the
    run would drop records no scan saw, or records delivered since: refused."""
    now: dict[tuple[str, int], int | None] = {}
    for entry in current:
        now[topic_partition_of(job.kind, entry.partition)] = next_offset_of(job.kind, entry.offset)
    moved = []
    for run in job.runs:
        position = now.get((run.topic, run.partition))
        if position in (run.committed, run.first, run.last + 1):
            continue
        moved.append(
            f"{run.topic}-{run.partition} is at {position} (the plan was computed at "
            f"{run.committed}, its run is {run.first}..{run.last})"
        )
    if moved:
        raise InvalidDocument(
            f"{job.connector} moved since the skip-run plan was computed: "
            + "; ".join(moved[:5])
            + (f" (+{len(moved) - 5} more)" if len(moved) > 5 else "")
            + ": nothing quarantined or patched; compute the plan again"
        )


def quarantine_context(
    job: SkipRunJob, connect_cluster: str | None, decision_id: str | None = None
) -> dict[str, str]:
    """The error context of every copy (headers, as the skip saga writes them)."""
    context = {
        "connector.name": job.connector,
        "stage": "REWIND_SKIP_RUN",
        "exception.message": f"matched the skip-run predicate {job.predicate}",
        "rewind.plan.sha256": job.document_sha256,
        "rewind.predicate": job.predicate,
    }
    if connect_cluster:
        context["connect.cluster"] = connect_cluster
    if decision_id:
        context["decision.id"] = decision_id
    return context
