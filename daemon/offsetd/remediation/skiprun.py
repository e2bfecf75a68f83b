"""Applying a skip-run plan: every record of each skipped run is quarantined before the patch.

A skip-run plan moves a partition past a run of matching records, so those records would never
be delivered again. Before any offset moves they are copied, whole, to the quarantine topic the
skip saga uses (`offsetd.remediation.quarantine`: same topic, same record format, the original
coordinates as Connect's `__connect.errors.*` headers), acknowledged by all in-sync replicas.
Only then is the plan's document patched; if any copy fails, nothing is patched.

This runs wherever a plan is applied: `offsetd offsets import plan.json` (the CLI) and the
daemon's `rewind` action with a `plan_file`. The runs come from the plan's summary
(`skipped_run` of each partition), checked against the document it describes (its hash) and
against the connector's position now: a run is quarantined and skipped only while it still
starts where the connector is.

Idempotent: every copy of one plan carries the same key (`offsetd.saga.key` =
`skip-run/<connector>/<plan hash>`), and all of them go to the one quarantine partition that key
chooses. Before copying, that partition is read for copies already made with the key, and only
the records not there yet are copied; a second application (or one after a crash halfway
through the copies) adds nothing twice and loses nothing.

No pyspark here: applying a plan needs only Kafka clients. (A little over 500 lines: the plan's
runs, their checks against the connector's position and the idempotent copy are one job.)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from offsetd.config import Settings
from offsetd.connect.client import ConnectClient
from offsetd.errors import ConfigError, InvalidDocument, OffsetdError
from offsetd.offsets.location import WorkerView, resolve_location
from offsetd.offsets.model import ConnectorKind, OffsetEntry, next_offset_of, topic_partition_of
from offsetd.offsets.rewind_plan import PLAN_FORMAT, Mode, RewindPlan, load_plan, summary_path
from offsetd.recordchecks import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaRecord,
)
from offsetd.remediation.quarantine import Quarantine, QuarantineFailed, durable_producer
from offsetd.remediation.quarantine_format import (
    H_OFFSET,
    H_ORIGINAL_HEADERS,
    H_PARTITION,
    H_QUARANTINED_AT,
    H_SAGA_KEY,
    H_TIMESTAMP_TYPE,
    H_TOPIC,
    context_headers,
)
from offsetd.remediation.records import read_records, to_record

__all__ = [
    "CopyResult",
    "RunCopier",
    "SkipRunJob",
    "SkippedRun",
    "check_positions",
    "copier_for",
    "copy_headers",
    "quarantine_context",
    "skip_run_job",
    "skip_run_job_of_file",
]

_TIMESTAMP_NAMES = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}
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


def copy_headers(
    record: KafkaRecord, key: str, context: Mapping[str, str], now_ms: int
) -> list[tuple[str, str | bytes | None]]:
    """The headers of a quarantine copy, exactly as `Quarantine.copy` writes them: the record's
    own, then its coordinates and the context, then offsetd's saga key and bookkeeping."""
    return [
        *record.headers,
        *context_headers(record, context),
        (H_SAGA_KEY, key.encode()),
        (H_QUARANTINED_AT, str(now_ms).encode()),
        (H_TIMESTAMP_TYPE, _TIMESTAMP_NAMES.get(record.timestamp_type, "none").encode()),
        (H_ORIGINAL_HEADERS, str(len(record.headers)).encode()),
    ]


@dataclass(frozen=True)
class CopyResult:
    topic: str
    partition: int
    copied: int
    already: int  # copies an earlier application of the same plan made

    def describe(self) -> str:
        again = f" ({self.already:,} already there)" if self.already else ""
        return (
            f"quarantined {self.copied + self.already:,} records to "
            f"{self.topic}-{self.partition}{again}"
        )


class RunCopier:
    """Copies the runs of a skip-run plan to the quarantine topic. Blocking: run it in a thread.

    `conf` is the Kafka cluster of the quarantine topic (the daemon's), `source_conf` the
    cluster the connector reads (where the runs are).
    """

    def __init__(
        self,
        conf: Mapping[str, str],
        topic: str,
        source_conf: Mapping[str, str],
        *,
        timeout_s: float = 30.0,
        chunk: int = 5_000,
        now_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.topic = topic
        self._conf = dict(conf)
        self._source_conf = dict(source_conf)
        self._timeout_s = timeout_s
        self._chunk = chunk
        self._now_ms = now_ms
        self._producer: Producer | None = None

    def copy(self, job: SkipRunJob, context: Mapping[str, str]) -> CopyResult:
        """Every record of every run in quarantine (acknowledged), or QuarantineFailed."""
        try:
            partition, end = self.target_partition(job.key)
            done = self.existing_copies(partition, end, job.key)
            copied = already = 0
            for run in job.runs:
                new, old = self._copy_run(job, run, partition, done, context)
                copied, already = copied + new, already + old
            return CopyResult(self.topic, partition, copied, already)
        finally:
            self.close()

    def _copy_run(
        self,
        job: SkipRunJob,
        run: SkippedRun,
        partition: int,
        done: set[Coordinates],
        context: Mapping[str, str],
    ) -> tuple[int, int]:
        position, seen, copied, already = run.first, 0, 0, 0
        first_seen: int | None = None
        while seen < run.records:
            chunk = [
                r
                for r in self.read_chunk(
                    run.topic, run.partition, position, min(self._chunk, run.records - seen)
                )
                if r.offset <= run.last
            ]
            if not chunk:
                break
            if first_seen is None:
                first_seen = chunk[0].offset
                if first_seen != run.first:
                    break  # its first record is gone: copy none of it
            seen += len(chunk)
            position = chunk[-1].offset + 1
            todo = [r for r in chunk if (r.topic, r.partition, r.offset) not in done]
            already += len(chunk) - len(todo)
            if todo:
                self.produce(partition, job.key, todo, context)
                copied += len(todo)
        if seen != run.records or first_seen != run.first or position != run.last + 1:
            raise QuarantineFailed(
                f"the run {run.describe()} cannot be quarantined whole: the partition no longer "
                f"holds exactly those records (first found: {first_seen}, records up to "
                f"{run.last}: {seen:,}); retention or compaction changed it since the plan was "
                "computed"
            )
        return copied, already

    # -- Kafka (overridden in unit tests) --------------------------------------------------------

    def target_partition(self, key: str) -> tuple[int, int]:
        """The quarantine partition of `key` (the topic is created if missing) and its end."""
        quarantine = Quarantine(self._conf, self.topic, timeout_s=self._timeout_s)
        try:
            mark = quarantine.mark(key)
        finally:
            quarantine.close()
        return int(mark["partition"]), int(mark["offset"])

    def existing_copies(self, partition: int, end: int, key: str) -> set[Coordinates]:
        """Original coordinates of the copies already in `partition` (before `end`) for `key`."""
        found: set[Coordinates] = set()
        if end <= 0:
            return found
        wanted = key.encode()
        consumer = Consumer(
            {
                **self._conf,
                "group.id": "offsetd-quarantine-reader",  # assign only: never joins or commits
                "enable.auto.commit": "false",
                "auto.offset.reset": "earliest",
                "enable.partition.eof": "true",
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, partition, 0)])
            position = 0
            deadline = time.monotonic() + max(self._timeout_s, 60.0)
            while position < end:
                if time.monotonic() > deadline:
                    raise QuarantineFailed(
                        f"timed out reading {self.topic}-{partition} for earlier copies of {key}"
                    )
                for msg in consumer.consume(1000, timeout=0.5):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            position = end
                            break
                        raise QuarantineFailed(
                            f"cannot read {self.topic}-{partition}: {error.str()}"
                        )
                    position = int(msg.offset() or 0) + 1
                    coordinates = _copy_of(msg, wanted)
                    if coordinates is not None:
                        found.add(coordinates)
        except KafkaException as exc:
            raise QuarantineFailed(f"cannot read {self.topic}-{partition}: {exc}") from None
        finally:
            consumer.close()
        return found

    def read_chunk(self, topic: str, partition: int, start: int, limit: int) -> list[KafkaRecord]:
        try:
            return read_records(
                self._source_conf, topic, partition, start, limit, timeout_s=self._timeout_s
            )
        except OffsetdError as exc:
            raise QuarantineFailed(f"cannot read the run to quarantine: {exc}") from None

    def produce(
        self, partition: int, key: str, records: Sequence[KafkaRecord], context: Mapping[str, str]
    ) -> None:
        """Copy `records` into `partition`; returns once all were acknowledged (acks=all)."""
        errors: list[str] = []
        acked = 0

        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            nonlocal acked
            if err is not None:
                errors.append(err.str())
            else:
                acked += 1

        producer = self._get_producer()
        now = self._now_ms()
        try:
            for record in records:
                has_time = record.timestamp_type in _TIMESTAMP_NAMES and record.timestamp_ms >= 0
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            key=record.key,
                            value=record.value,
                            headers=copy_headers(record, key, context, now),
                            partition=partition,
                            timestamp=record.timestamp_ms if has_time else 0,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:  # the local queue is full: let it drain
                        producer.poll(0.5)
            remaining = producer.flush(self._timeout_s)
        except KafkaException as exc:
            errors.append(str(exc.args[0]) if exc.args else type(exc).__name__)
            remaining = 0
        if remaining or errors or acked != len(records):
            first, last = records[0], records[-1]
            raise QuarantineFailed(
                f"{len(records) - acked:,} of the records {first.coordinates}..{last.offset} were "
                f"not copied to quarantine topic {self.topic}: "
                f"{errors[0] if errors else 'not acknowledged in time'}"
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self._timeout_s)
            self._producer = None

    def _get_producer(self) -> Producer:
        if self._producer is None:
            self._producer = durable_producer(self._conf, self._timeout_s, linger_ms=5)
        return self._producer


def _copy_of(msg: Message, key: bytes) -> Coordinates | None:
    """The original coordinates of a quarantine copy made with `key` (None: another copy)."""
    record = to_record(msg)
    last: dict[str, bytes | None] = {}
    for name, value in record.headers:  # ours come after the record's own: the last one wins
        last[name] = value
    if last.get(H_SAGA_KEY) != key:
        return None
    topic, partition, offset = last.get(H_TOPIC), last.get(H_PARTITION), last.get(H_OFFSET)
    if topic is None or partition is None or offset is None:
        return None
    try:
        return topic.decode(), int(partition), int(offset)
    except ValueError:
        return None


async def copier_for(
    settings: Settings | None,
    client: ConnectClient,
    worker: WorkerView,
    connector: str,
    kind: ConnectorKind,
) -> tuple[RunCopier, str]:
    """The copier for `connector`'s runs, and where the copies go (for people).

    Copies go to `remediation.quarantine_topic` on the daemon's Kafka cluster, as the skip
    saga's; the runs are read from the cluster the connector reads. Writes nothing.
    """
    if settings is None:
        raise ConfigError(
            "applying a skip-run plan quarantines its runs first, which needs the daemon's Kafka "
            "cluster from offsetd.yaml: pass --config; nothing was changed"
        )
    try:
        alias = settings.daemon_kafka_cluster()
    except ConfigError as exc:
        raise ConfigError(
            f"applying a skip-run plan quarantines its runs first: {exc}; nothing was changed"
        ) from None
    info = await client.info(connector)
    location = resolve_location(connector, info.config, kind, worker, settings)
    if location.data_cluster is None:
        raise ConfigError(
            f"cannot tell which Kafka cluster {connector}'s records are on, so its skip-run "
            "cannot be quarantined: set kafka_cluster for the Connect cluster in offsetd.yaml"
        )
    topic = settings.remediation.quarantine_topic
    copier = RunCopier(
        settings.kafka_clusters[alias].client_config(),
        topic,
        location.data_cluster.client_config(settings),
    )
    return copier, f"quarantine topic {topic} on Kafka cluster {alias}"
