"""The sections that tune offsetd itself: offsets, daemon, remediation, lag and Spark.

Durations are strings such as `30s`, `2m`, `1h` (`offsetd.durations`), kept as milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import AfterValidator, Field, model_validator

from offsetd.config.connect_clusters import ConnectorScope
from offsetd.config.fields import (
    Alias,
    ClientProperties,
    ConfigModel,
    NonEmptyStr,
    Secret,
    TopicName,
    is_secret_property,
    none_to_empty,
)
from offsetd.durations import Duration
from offsetd.yamlerrors import LocatedError

__all__ = [
    "BlastRadius",
    "DaemonSettings",
    "LagSettings",
    "OffsetsSettings",
    "RemediationSettings",
    "SkipBudget",
    "SparkSettings",
]


class OffsetsSettings(ConfigModel):
    """Where the offsets toolkit keeps its snapshots (the before/after images behind undo)."""

    snapshots_topic: TopicName = "offsetd.snapshots"
    # Default: the Kafka cluster of the Connect cluster being changed.
    snapshots_kafka_cluster: Alias | None = None


class DaemonSettings(ConfigModel):
    """`offsetd run`: which Kafka cluster this process reads, and how it spreads the work.

    One process consumes one Kafka cluster (faust's model): the status, offsets and DLQ topics of
    every Connect cluster whose internal topics live there.
    """

    kafka_cluster: Alias | None = None  # default: the only one holding Connect internal topics
    app_id: NonEmptyStr = "offsetd"
    partitions: Annotated[int, Field(ge=1, le=1024)] = 8  # the re-keyed topic and every Table
    rules_dir: Path = Path("rules/examples")
    audit_topic: TopicName = "offsetd.audit"
    web_host: NonEmptyStr = "127.0.0.1"
    web_port: Annotated[int, Field(ge=0, le=65535)] = 6066
    data_dir: Path = Path(".offsetd/state")
    replication_factor: Annotated[int, Field(ge=1, le=10)] | None = None
    # The workers' consumer group (faust's broker_session_timeout, broker_heartbeat_interval,
    # broker_rebalance_timeout). A worker that ends without leaving the group (SIGKILL, OOM
    # kill, a lost host) keeps its partitions until `group_session_timeout` passes without its
    # heartbeat: until then nothing is decided for its connectors, a restarted worker included.
    # A saga it left unfinished does not wait when it restarts in place (docs/daemon.md: "After a
    # crash"). Shorter: faster takeover after a lost host, more rebalances on a slow network
    # or a busy event loop. Kafka brokers accept 6s to 30m by default.
    group_session_timeout: Annotated[Duration, Field(ge=6_000, le=1_800_000)] = 60_000
    group_heartbeat_interval: Annotated[Duration, Field(ge=100)] = 3_000
    group_rebalance_timeout: Annotated[Duration, Field(ge=1_000)] = 60_000
    # /readyz: Kafka, the Connect clusters and the worker's stream are probed this often; a
    # stream partition whose position has not moved for `stall_after` while records wait makes
    # the worker unready (a decision can take a while: a skip saga waits on Connect).
    health_probe_interval: Annotated[Duration, Field(ge=1_000, le=300_000)] = 5_000
    stall_after: Annotated[Duration, Field(ge=10_000)] = 120_000
    # The audit counts suppressed decisions instead of listing them: one record per rule,
    # connector, reason, incident and window of this length in event time (offsetd.engine.tally)
    suppressed_window: Annotated[Duration, Field(ge=1_000, le=86_400_000)] = 600_000
    # Frames are decided by the compiled engine (native/, offsetd-native) where it is installed
    # and decides the rules exactly, the Python engine deciding what it leaves; off: the Python
    # engine decides everything (docs/daemon.md, "Which engine decides").
    compiled_engine: bool = True

    @model_validator(mode="after")
    def _check_group_timings(self) -> Self:
        if self.group_heartbeat_interval * 3 > self.group_session_timeout:
            raise ValueError(
                "daemon.group_heartbeat_interval must be at most a third of "
                "daemon.group_session_timeout (a member is dropped after one session timeout "
                "without a heartbeat)"
            )
        return self


class BlastRadius(ConfigModel):
    """An outage is not a poison record: above this many failing connectors, act on none.

    A connector counts when it is failing now or went FAILED within `within` (Connect's status
    topic). The count is taken no earlier than `settle` after the event that led to the
    decision: connectors failing together report FAILED a moment apart (a DLQ record even
    comes ~0.5 s before its own FAILED status).
    """

    max_failing_connectors: Annotated[int, Field(ge=1)] = 3
    within: Duration = 300_000
    settle: Duration = 5_000


class SkipBudget(ConfigModel):
    """At most `max` skips per connector per `per`, across rules, stored durably."""

    max: Annotated[int, Field(ge=1)] = 5
    per: Duration = 3_600_000


class RemediationSettings(ConfigModel):
    """How decisions act: the durable topics, the guardrails and the saga's timings.

    Durations are strings such as `30s`, `2m`, `1h`. All topics live on the daemon's Kafka cluster.
    """

    quarantine_topic: TopicName = "offsetd.quarantine"
    sagas_topic: TopicName = "offsetd.sagas"
    control_topic: TopicName = "offsetd.control"
    # Connector classes (globs) whose offsets offsetd may move past a record; `sink` means any
    # sink connector (Connect owns a sink's offsets in its consumer group).
    skip_allowlist: list[NonEmptyStr] = Field(
        default_factory=lambda: ["sink", "org.apache.kafka.connect.mirror.MirrorSourceConnector"]
    )
    opt_out: list[NonEmptyStr] = Field(
        default_factory=list, description="Connector name globs offsetd never acts on."
    )
    # The connectors this deployment owns on every Connect cluster without a scope of its own
    # (offsetd.scope); the rest are dropped before the rules. Empty: every connector.
    scope: Annotated[ConnectorScope, none_to_empty(ConnectorScope)] = Field(
        default_factory=ConnectorScope
    )
    skip_budget: SkipBudget = Field(default_factory=SkipBudget)
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    # A failure this soon after a skip, at the skipped record or before it (the failure did not
    # move), opens the breaker; a failure at a later record is a new poison record.
    breaker_window: Duration = 600_000
    # A run of bad records next to each other is one incident: each is located, quarantined and
    # skipped in turn, up to this many; one more opens the breaker ("a run of N bad records").
    # 5: a bad deploy writes a few; more in a row is a change upstream a person must see, and 5
    # is what the default skip budget allows in an hour.
    max_poison_run: Annotated[int, Field(ge=1, le=100)] = 5
    verify_stable_for: Duration = 120_000
    stop_timeout: Duration = 60_000
    resume_timeout: Duration = 120_000
    locate_timeout: Duration = 120_000  # waiting for the failure to repeat in one-record batches
    webhook_timeout: Duration = 5_000
    # Named webhook URLs a notify action can name instead of a URL (`webhook: oncall`): a URL
    # whose path is a token belongs here, set from a secret
    # (`OFFSETD_REMEDIATION__WEBHOOKS__ONCALL`), not in the rules.
    webhooks: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")], Secret] = Field(
        default_factory=dict
    )
    max_retries: Annotated[int, Field(ge=0, le=20)] = 5  # Connect 409/500/no answer, per step


def _check_group_glob(pattern: str) -> str:
    # A group id may hold spaces, but one at either end of a pattern is a typo that would match
    # nothing, silently: no group would ever be expected.
    if pattern != pattern.strip():
        raise ValueError(f"{pattern!r} has a space at one end (group patterns match exactly)")
    return pattern


GroupGlob = Annotated[NonEmptyStr, AfterValidator(_check_group_glob)]


class LagSettings(ConfigModel):
    """MirrorMaker 2 lag collection (`offsetd lag`, and the daemon's /metrics page).

    `enabled`: `offsetd run` collects lag in exactly one of its workers (the owner of partition
    0 of its internal events topic) and appends it to that worker's /metrics; false leaves lag to
    a separate `offsetd lag serve`. Durations are strings such as `10s`, `5m`. `window` is how
    far back the status rules look (Burrow style); `flush_interval` is Connect's
    `offset.flush.interval.ms`, which bounds how fresh N can be; `stall_after` is how long a
    RUNNING connector may leave N unchanged while records wait before its partition reads STALL
    (never less than 3 flush intervals: a shorter time cannot tell a stall from a pending
    flush). The sample window is kept in `state_file` (default: in `daemon.data_dir`).

    `failover_groups`: consumer groups (names or `fnmatch` globs, case-sensitive) expected to
    fail over through MM2's checkpoints; each is judged ready or not on every checkpoint flow
    from its source cluster (`offsetd.lag.readiness`), and `MM2GroupCannotFailOver` alerts on
    one that is not. `failover_max_checkpoint_age`: a checkpoint older than this while its group
    has moved past it makes the group not ready (MM2 writes one per
    `emit.checkpoints.interval.seconds`, 60 s by default, when the group moved: keep this well
    above that interval).
    """

    enabled: bool = True
    interval: Duration = 10_000
    window: Duration = 600_000
    flush_interval: Duration = 60_000
    stall_after: Duration = 60_000
    aggregate_per_topic: bool = False  # one series per topic instead of per partition
    seconds_lag_concurrency: Annotated[int, Field(ge=1, le=1000)] = 256  # partitions at a time
    seconds_lag_max_fetches: Annotated[int, Field(ge=0)] = 2_000  # per cycle; the rest next cycle
    # Partitions per ListOffsets call; None: one call per source cluster and cycle (one request
    # per broker). librdkafka merges a call's answers in O(n^2), so an estate far above ~20k
    # partitions per source cluster may trade requests for CPU, e.g. 10000.
    list_offsets_batch: Annotated[int, Field(ge=100)] | None = None
    slo_seconds: Annotated[float, Field(gt=0)] = 300.0  # exported for the seconds-lag alert
    state_file: Path | None = None
    failover_groups: Annotated[list[GroupGlob], none_to_empty(list)] = Field(default_factory=list)
    failover_max_checkpoint_age: Annotated[Duration, Field(ge=1_000)] = 300_000


class ProgressSettings(ConfigModel):
    """Progress read from Kafka, for failures Connect's status does not show (docs/lag.md
    "Stuck connectors"): a sink's commits against its log ends, MM2 flows' statuses.

    Collected with MM2 lag, every `lag.interval`, by the same single worker. `stall_after`: how
    long a RUNNING sink task may commit nothing while records wait before it reads `stalled`;
    default and minimum 3 x `lag.flush_interval` (Connect's `offset.flush.interval.ms`, which is
    also how often a sink task commits: a shorter time could not tell a stall from a commit
    still to come). `stuck_after`: how long a task may stay UNASSIGNED, RESTARTING or without
    any status while the worker group is stable before it reads `unassigned`; the default is
    Connect's `scheduled.rebalance.max.delay.ms` (5m, how long the group may leave a departed
    worker's tasks unassigned on purpose) plus one minute. `events: false` exports the series
    but sends no progress events to the rules.
    """

    enabled: bool = True
    events: bool = True
    stall_after: Duration | None = None
    stuck_after: Annotated[Duration, Field(ge=10_000)] = 360_000

    def stall_after_ms(self, flush_interval_ms: int) -> int:
        return max(self.stall_after or 0, 3 * flush_interval_ms)


class SparkSettings(ConfigModel):
    """Spark for `offsetd rewind plan` (content-based targets; see offsetd.spark).

    `master` is where the scan runs (`local[2]` by default; `yarn`, `k8s://...`, `spark://...`
    on a cluster); `conf` is passed to the SparkSession as is, e.g. `spark.driver.memory` or, on
    a cluster, `spark.jars.packages: org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`.
    Spark logs its conf, so secret-looking keys are refused here: Kafka credentials come from
    `kafka_clusters` and go only into the Kafka source's options.
    """

    master: NonEmptyStr = "local[2]"
    conf: ClientProperties = Field(default_factory=dict)

    @model_validator(mode="after")
    def _no_secrets(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = [
            (("conf", key), "looks like a secret: Spark logs its conf, keep secrets out of it")
            for key in self.conf
            if is_secret_property(key)
        ]
        if problems:
            raise LocatedError(problems)
        return self
