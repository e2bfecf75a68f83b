"""`offsetd lag`: MirrorMaker 2 lag printed once, for a person; `offsetd lag serve`: /metrics."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from offsetd.cli.failures import reports_errors
from offsetd.cli.output import emit_json, table
from offsetd.config import DEFAULT_CONFIG_PATH, load_settings
from offsetd.errors import KafkaAccessDenied
from offsetd.kafkaaccess import DENIED
from offsetd.kafkalogin import check_logins
from offsetd.lag.exporter import LagExporter
from offsetd.lag.readiness import GroupReadiness
from offsetd.lag.snapshot import Snapshot

__all__ = ["config_option", "lag", "serve", "state_option"]

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="OFFSETD_CONFIG",
    default=str(DEFAULT_CONFIG_PATH),
    show_default=True,
)
state_option = click.option(
    "--state-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where the status windows are kept (default: lag.state_file, else in daemon.data_dir).",
)


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def _print_table(snapshot: Snapshot) -> None:
    now = snapshot.taken_ms
    # Two MirrorSourceConnectors may replicate one topic on one pair (blue/green, a subset): the
    # connector tells their rows apart; its Connect cluster only when there are several.
    clusters = {p.connect_cluster for p in snapshot.partitions}
    rows: list[list[Any]] = [
        [
            f"{p.source}->{p.target}",
            p.connector if len(clusters) < 2 else f"{p.connect_cluster}/{p.connector}",
            p.topic,
            p.partition,
            p.end,
            "not started" if p.last_replicated is None else p.last_replicated,
            p.lag_records,
            _seconds(p.lag_seconds),
            _seconds(p.offset_age_seconds(now)),
            str(p.status),
        ]
        for p in snapshot.partitions
    ]
    headers = [
        "flow",
        "connector",
        "topic",
        "partition",
        "end",
        "replicated",
        "lag",
        "lag s",
        "n age s",
    ]
    click.echo(table([*headers, "status"], rows))
    if snapshot.heartbeats:
        click.echo("")
        click.echo(
            table(
                ["cluster", "heartbeats topic", "kind", "age s"],
                [
                    [
                        h.cluster,
                        h.topic,
                        "replicated" if h.source else "local",
                        _seconds(h.age_seconds),
                    ]
                    for h in snapshot.heartbeats
                ],
            )
        )
    if snapshot.checkpoints:
        click.echo("")
        click.echo(
            table(
                [
                    "group",
                    "topic",
                    "partition",
                    "group offset",
                    "checkpoint",
                    "age s",
                    "reconsume>=",
                ],
                [
                    [
                        c.group,
                        c.topic,
                        c.partition,
                        c.group_offset,
                        c.upstream_offset,
                        _seconds(c.age_seconds),
                        c.reconsume_lower_bound,
                    ]
                    for c in snapshot.checkpoints
                ],
            )
        )
    if snapshot.failover:
        click.echo("")
        click.echo("failover readiness")
        click.echo(_failover_table(snapshot.failover))
    if snapshot.sink_partitions:
        # One look cannot tell a stall (that needs time): stuck states are the daemon's and
        # `lag serve`'s (offsetd_connector_progress); this is where each sink stands.
        click.echo("")
        click.echo(
            table(
                ["sink", "task", "topic", "partition", "committed", "end", "lag", "lag s"],
                [
                    [
                        p.connector,
                        "" if p.task_id is None else p.task_id,
                        p.topic,
                        p.partition,
                        "none" if p.committed is None else p.committed,
                        p.end,
                        p.waiting,
                        _seconds(p.lag_seconds(now)),
                    ]
                    for p in snapshot.sink_partitions
                ],
            )
        )
    for stage, message in sorted(snapshot.errors.items()):
        click.echo(f"warning: {stage}: {message}", err=True)


def _failover_table(rows: Sequence[GroupReadiness]) -> str:
    """One line per group and checkpoint flow; the connector only when a pair has several."""
    connectors = {(g.source, g.target, g.connect_cluster, g.connector) for g in rows}
    several = len(connectors) > len({c[:2] for c in connectors})

    def flow(g: GroupReadiness) -> str:
        pair = f"{g.source}->{g.target}"
        return f"{pair} ({g.connect_cluster}/{g.connector})" if several else pair

    def reason(g: GroupReadiness) -> str:
        if not g.uncovered:
            return g.reason
        more = ", ..." if g.uncovered_count > len(g.uncovered) else ""
        return f"{g.reason} ({', '.join(g.uncovered)}{more})"

    return table(
        ["group", "flow", "expected", "ready", "covered", "ckpt age s", "re-read>=", "reason"],
        [
            [
                g.group,
                flow(g),
                "yes" if g.expected else "no",
                "yes" if g.ready else "no",
                f"{g.covered}/{g.partitions}" if g.commits_known else None,
                _seconds(g.checkpoint_age_max_seconds),
                g.reread_lower_bound,
                reason(g),
            ]
            for g in rows
        ],
    )


@click.group(invoke_without_command=True)
@config_option
@state_option
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table")
@click.pass_context
@reports_errors
def lag(ctx: click.Context, config_path: Path, state_file: Path | None, output: str) -> None:
    """MirrorMaker 2 lag (records, seconds, status), failover readiness per group and sink lag,
    printed once."""
    if ctx.invoked_subcommand is not None:
        return
    # The windows (for the statuses) are read but never written: the file may be a running
    # daemon's or `lag serve`'s, and one sample from here must not overwrite theirs.
    settings = load_settings(config_path)
    check_logins(settings)  # a refused login or certificate: one line and its exit code
    exporter = LagExporter(
        settings, state_file=state_file, read_only_state=True, refusals_fatal=True
    )
    try:
        snapshot = exporter.run_once()
    finally:
        exporter.stop()
    if output == "json":
        emit_json(snapshot.as_json())
    else:
        _print_table(snapshot)
    refused = [m for m in snapshot.errors.values() if m.startswith(DENIED)]
    if refused:  # what could be read is printed; a missing ACL is not a passing state
        click.echo(f"error: {refused[0]}", err=True)
        sys.exit(KafkaAccessDenied.exit_code)


@lag.command()
@config_option
@state_option
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=9644, show_default=True, help="0 picks a free port.")
@reports_errors
def serve(config_path: Path, state_file: Path | None, host: str, port: int) -> None:
    """Collect in the background and serve the metrics on http://HOST:PORT/metrics."""
    # http.server costs a one-shot `offsetd lag` about 20 ms: imported only to serve
    from offsetd.lag.server import metrics_server  # noqa: PLC0415

    exporter = LagExporter(load_settings(config_path), state_file=state_file)
    server = metrics_server(host, port, exporter.render)
    click.echo(f"serving MM2 lag on http://{host}:{server.server_address[1]}/metrics", err=True)
    exporter.start()
    done = threading.Event()

    def shut(_signum: int, _frame: Any) -> None:
        done.set()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, shut)
    signal.signal(signal.SIGINT, shut)
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()
        exporter.stop()
