"""`offsetd mm2 failover` and `offsetd mm2 failback`: consumer groups moved between the clusters
of a MirrorMaker 2 pair, the offset step of disaster recovery (see offsetd.failover).

Both are one command: translate every commit of the chosen groups from `--from` to `--to`
with MM2's own checkpoints and offset syncs, print the plan (`--dry-run` stops there, `-o json`
for tools), refuse what is unsafe, then commit group by group with a snapshot first and a read
back after. `failback` is the same move in the other direction; it reads the other flow's
offset syncs in reverse where no flow checkpoints the way back.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import click

from offsetd.cli.failures import reports_errors
from offsetd.cli.output import emit_json, table
from offsetd.config import DEFAULT_CONFIG_PATH, Settings, load_settings
from offsetd.durations import parse_duration
from offsetd.errors import ConfigError, FailoverError
from offsetd.failover.apply import GroupOutcome, apply_group, offsets_of, undo_group
from offsetd.failover.kafka import TargetGroups
from offsetd.failover.plan import GroupPlan, PlanOptions
from offsetd.failover.policy import ReplicationPolicy, policy_of_config
from offsetd.failover.session import FailoverRequest, Gathered, gather, plan_all
from offsetd.lag.connect_state import MirrorFlow, read_connect
from offsetd.offsets.model import ConnectorKind
from offsetd.offsets.snapshots import FileSnapshotStore, KafkaSnapshotStore, SnapshotStore

__all__ = ["group_store", "mm2", "undo_group_change"]

log = logging.getLogger(__name__)


@click.group()
def mm2() -> None:
    """MirrorMaker 2 consumer groups: failover and failback between the clusters of a pair."""


def _options(func: Any) -> Any:
    options = [
        click.argument("groups", nargs=-1, required=True),
        click.option("--from", "source", required=True, help="The cluster alias the groups leave."),
        click.option("--to", "target", required=True, help="The cluster alias they move to."),
        click.option(
            "--missing",
            type=click.Choice(["refuse", "earliest", "latest"]),
            default="refuse",
            show_default=True,
            help="A partition nothing translates: refuse the group, or start it at the "
            "target's log start or end.",
        ),
        click.option(
            "--allow-backwards",
            is_flag=True,
            help="Move a group back where the target already has it further on.",
        ),
        click.option(
            "--allow-stale",
            is_flag=True,
            help="Use checkpoints older than --max-checkpoint-age that the group has moved past.",
        ),
        click.option(
            "--max-checkpoint-age",
            default="5m",
            show_default=True,
            help="How old a checkpoint the group has moved past may be (5 x MM2's default "
            "emit.checkpoints.interval of 60 s).",
        ),
        click.option("--dry-run", is_flag=True, help="Print the plan; change nothing."),
        click.option(
            "--policy",
            type=click.Choice(["auto", "default", "identity"]),
            default="auto",
            show_default=True,
            help="MM2's replication policy (auto: the MM2 connectors' config, else default).",
        ),
        click.option("--separator", default=None, help="replication.policy.separator (auto)."),
        click.option(
            "--offset-syncs-location",
            type=click.Choice(["auto", "source", "target"]),
            default="auto",
            show_default=True,
            help="offset-syncs.topic.location of the flows (auto: their config, else source).",
        ),
        click.option(
            "--no-source",
            is_flag=True,
            help="Do not ask the cluster the groups leave (it is gone): translate from the "
            "checkpoints alone.",
        ),
        click.option(
            "--source-timeout",
            default=10.0,
            show_default=True,
            help="Seconds to wait for the cluster the groups leave before going on without it.",
        ),
        click.option(
            "--snapshot-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Keep the snapshots in this folder (default: the offsets.snapshots topic on "
            "offsets.snapshots_kafka_cluster, else on the target).",
        ),
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False, path_type=Path),
            envvar="OFFSETD_CONFIG",
            default=None,
            help="offsetd.yaml (default: ./offsetd.yaml).",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice(["table", "json"]),
            default="table",
            show_default=True,
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@mm2.command()
@_options
@reports_errors
def failover(**kw: Any) -> None:
    """Move consumer groups from --from to --to: translate, check, commit, read back.

    GROUPS are names or globs ('orders-*'). Each group's commits on --from are translated to
    --to with the checkpoints MM2 wrote there, and its offset syncs where a checkpoint is older
    than the group's commit. Refused, with nothing changed: a group with members on --to, a
    partition nothing translates (see --missing), a stale checkpoint. Never moves a group
    backwards on --to (MM2's sync.group.offsets.enabled may have moved it) unless asked.
    """
    _run("mm2-failover", **kw)


@mm2.command()
@_options
@reports_errors
def failback(**kw: Any) -> None:
    """Move consumer groups back (--from the DR cluster --to the recovered one).

    The same safe sequence as failover. Translated with the checkpoints of a flow --from ->
    --to where one exists, else the inverse of the --to -> --from flow's offset syncs: a topic
    that is a replica on --from goes back to its original on --to, at the upstream offset of
    the newest sync at or below the group's commit (re-reading, never skipping).
    """
    _run("mm2-failback", **kw)


def _settings(path: Path | None) -> Settings:
    if path is None and Path(DEFAULT_CONFIG_PATH).exists():
        path = Path(DEFAULT_CONFIG_PATH)
    if path is None:
        raise ConfigError(f"no {DEFAULT_CONFIG_PATH} here: pass --config")
    return load_settings(path, environ=os.environ)


def _cluster_conf(settings: Settings, alias: str, role: str) -> dict[str, str]:
    cluster = settings.kafka_clusters.get(alias)
    if cluster is None:
        known = ", ".join(sorted(settings.kafka_clusters)) or "none"
        raise ConfigError(f"{role} {alias!r} is not a cluster in kafka_clusters (known: {known})")
    return dict(cluster.client_config())


def _flow_config(settings: Settings, source: str, target: str) -> dict[str, str] | None:
    """The config of the MM2 connector that best describes the flow `source` -> `target` (its
    MirrorSourceConnector, which names the policy and where the offset syncs live; else its
    checkpoint connector; else any of the pair), asked of every Connect cluster in the config
    for 5 s; None when none answers or none has one."""

    def rank(flow: MirrorFlow) -> tuple[int, int]:
        same = (flow.source, flow.target) == (source, target)
        kind = {ConnectorKind.MIRROR_SOURCE: 0, ConnectorKind.MIRROR_CHECKPOINT: 1}
        return (0 if same else 1, kind.get(flow.kind, 2))

    async def ask() -> dict[str, str] | None:
        found: list[tuple[tuple[int, int], dict[str, str]]] = []
        for name, cluster in sorted(settings.connect_clusters.items()):
            try:
                view = await asyncio.wait_for(read_connect(name, cluster, 5.0), 6.0)
            except Exception as exc:  # it may be down with its cluster: the flags decide
                log.debug("Connect cluster %s did not answer: %s", name, exc)
                continue
            found += [
                (rank(flow), view.configs.get(flow.connector, {}))
                for flow in view.flows
                if {flow.source, flow.target} == {source, target}
            ]
        return min(found, key=lambda item: item[0])[1] if found else None

    return asyncio.run(ask())


def _policy(
    settings: Settings, kw: dict[str, Any], notes: list[str], operation: str
) -> tuple[ReplicationPolicy, str]:
    policy_name, separator, location = kw["policy"], kw["separator"], kw["offset_syncs_location"]
    config = None
    if "auto" in (policy_name, location) or separator is None:
        # the flow whose syncs are read: failover's own, failback's the other way
        source, target = kw["source"], kw["target"]
        flow = (source, target) if operation == "mm2-failover" else (target, source)
        config = _flow_config(settings, *flow)
        if config is None:
            notes.append(
                "no Connect cluster answered with an MM2 connector of this pair: "
                "MM2's defaults assumed (default policy, '.', syncs on the source)"
            )
    policy = ReplicationPolicy()
    if config is not None:
        try:
            policy = policy_of_config(config)
        except ValueError as exc:
            if policy_name == "auto":
                raise ConfigError(str(exc)) from None
    if policy_name != "auto":
        policy = ReplicationPolicy(policy_name, policy.separator, policy.internal_separator)
    if separator is not None:
        policy = ReplicationPolicy(policy.kind, separator, policy.internal_separator)
    if location == "auto":
        location = (config or {}).get("offset-syncs.topic.location", "source").strip().lower()
    return policy, location


def _store(settings: Settings, target: str, snapshot_dir: Path | None) -> SnapshotStore:
    if snapshot_dir is not None:
        return FileSnapshotStore(snapshot_dir)
    alias = settings.offsets.snapshots_kafka_cluster or target
    conf = _cluster_conf(settings, alias, "offsets.snapshots_kafka_cluster")
    return KafkaSnapshotStore(conf, settings.offsets.snapshots_topic)


def _run(operation: str, **kw: Any) -> None:
    settings = _settings(kw["config_path"])
    source, target = kw["source"], kw["target"]
    if source == target:
        raise click.UsageError("--from and --to name the same cluster")
    target_conf = _cluster_conf(settings, target, "--to")
    source_conf = _cluster_conf(settings, source, "--from")
    notes: list[str] = []
    policy, location = _policy(settings, kw, notes, operation)
    if location not in ("source", "target"):
        raise ConfigError(f"offset-syncs.topic.location {location!r} is not source or target")
    try:
        max_age_s = parse_duration(kw["max_checkpoint_age"]) / 1000.0
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--max-checkpoint-age") from None
    request = FailoverRequest(
        source,
        target,
        tuple(kw["groups"]),
        target_conf,
        None if kw["no_source"] else source_conf,
        policy,
        location,  # type: ignore[arg-type]
        "failover" if operation == "mm2-failover" else "failback",
        kw["source_timeout"],
    )
    gathered = gather(request)
    gathered.notes[:0] = notes
    options = PlanOptions(kw["missing"], kw["allow_backwards"], max_age_s, kw["allow_stale"])
    plans = plan_all(gathered, options)
    refused = [p for p in plans if p.refusal is not None]
    outcomes: list[GroupOutcome] = []
    if not kw["dry_run"] and not refused:
        store = _store(settings, target, kw["snapshot_dir"])
        for plan in plans:
            outcomes.append(apply_group(gathered.target, store, plan, operation))
    _print(kw["output"], operation, gathered, plans, outcomes, kw["dry_run"])
    if refused:
        lines = "; ".join(p.refusal or "" for p in refused)
        raise FailoverError(f"refused, nothing changed: {lines}")
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        raise FailoverError("; ".join(f"{o.group}: {o.message}" for o in failed))


def _print(
    output: str,
    operation: str,
    gathered: Gathered,
    plans: list[GroupPlan],
    outcomes: list[GroupOutcome],
    dry_run: bool,
) -> None:
    flow = gathered.flow
    undo = [
        f"offsetd offsets undo {o.snapshot_id} --kafka-cluster {flow.target}"
        for o in outcomes
        if o.snapshot_id is not None and o.status == "applied"
    ]
    if output == "json":
        emit_json(
            {
                "operation": operation,
                "source": flow.source,
                "target": flow.target,
                "source_answered": gathered.source_answered,
                "policy": flow.policy.kind,
                "dry_run": dry_run,
                "notes": gathered.notes,
                "groups": [p.as_json() for p in plans],
                "outcomes": [o.as_json() for o in outcomes],
                "undo": undo,
            }
        )
        return
    for note in gathered.notes:
        click.echo(f"note: {note}")
    for plan in plans:
        bound = "unknown" if plan.reread_max is None else f"<= {plan.reread_max:,}"
        click.echo(
            f"\ngroup {plan.group}: {plan.source} -> {plan.target}, {len(plan.commits)} "
            f"commit(s), records read twice {bound}"
            + (f"  REFUSED: {plan.refusal}" if plan.refusal else "")
        )
        rows = [
            (
                f"{m.source_topic}-{m.partition}",
                m.source_offset,
                f"{m.target_topic}-{m.partition}",
                m.target_offset,
                m.current,
                m.via,
                f"{m.reread_min}..{'?' if m.reread_max is None else m.reread_max}",
                m.action,
                "; ".join(m.notes),
            )
            for m in plan.moves
        ]
        headers = ["from", "commit", "to", "offset", "now", "via", "re-read", "action", "notes"]
        click.echo(table(headers, rows))
        for note in plan.notes:
            click.echo(f"  note: {note}")
    for outcome in outcomes:
        click.echo(f"{outcome.group}: {outcome.status} ({outcome.message})")
    for line in undo:
        click.echo(f"undo: {line}")
    if dry_run:
        click.echo("dry run: nothing changed")


def group_store(config_path: Path | None, alias: str, snapshot_dir: Path | None) -> SnapshotStore:
    """Where `failover` kept the snapshots of groups on `alias` (for history and undo)."""
    settings = _settings(config_path)
    _cluster_conf(settings, alias, "--kafka-cluster")
    return _store(settings, alias, snapshot_dir)


def undo_group_change(
    snapshot_id: str,
    alias: str,
    *,
    force: bool,
    dry_run: bool,
    config_path: Path | None,
    snapshot_dir: Path | None,
    output: str,
) -> None:
    """`offsetd offsets undo ID --kafka-cluster ALIAS`: a group's before-image, restored."""
    settings = _settings(config_path)
    groups = TargetGroups(_cluster_conf(settings, alias, "--kafka-cluster"), alias)
    store = _store(settings, alias, snapshot_dir)
    undo, outcome = undo_group(groups, store, snapshot_id, force=force, dry_run=dry_run)
    before, after = offsets_of(undo.before), offsets_of(undo.after)
    rows = [
        (f"{t}-{p}", before.get((t, p)), after.get((t, p)))
        for t, p in sorted(set(before) | set(after))
        if before.get((t, p)) != after.get((t, p))
    ]
    if output == "json":
        emit_json(
            {
                "snapshot": undo.id,
                "undo_of": snapshot_id,
                "group": undo.connector,
                "kafka_cluster": alias,
                "dry_run": dry_run,
                "changes": [{"partition": r[0], "now": r[1], "restored": r[2]} for r in rows],
                "outcome": None if outcome is None else outcome.as_json(),
            }
        )
    else:
        click.echo(f"group {undo.connector} on {alias}: restore the before-image of {snapshot_id}")
        click.echo(table(["partition", "now", "restored"], rows))
        click.echo(
            "dry run: nothing changed"
            if outcome is None
            else f"{outcome.status}: {outcome.message} (snapshot {undo.id})"
        )
    if outcome is not None and outcome.status == "failed":
        raise FailoverError(f"{undo.connector}: {outcome.message}")
