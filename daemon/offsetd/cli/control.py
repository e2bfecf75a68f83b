"""Operator commands on the guard state: approvals, breakers, the global pause, opt-outs.

Each command reads the control topic whole, checks that the change applies (approving an id that
is not pending is an error, not a silent overwrite), and writes one acknowledged record that says
who (`--by`, default the OS user) and when. A running daemon picks the change up before its next
decision (`ControlStore.catch_up`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from offsetd.cli.common import reports_errors
from offsetd.cli.output import emit_json, table
from offsetd.cli.run import config_option
from offsetd.config import Settings, load_settings
from offsetd.errors import ConfigError, ControlRefused
from offsetd.remediation.control import ControlStore
from offsetd.remediation.control_state import ControlState, current_user

__all__ = [
    "approvals",
    "approve",
    "automation",
    "automation_status",
    "breaker",
    "breaker_list",
    "breaker_reset",
    "by_option",
    "cluster_option",
    "opt_in",
    "opt_out",
    "output_option",
    "pause",
    "reject",
    "resume_automation",
    "status_document",
]

by_option = click.option(
    "--by", default=None, help="Who is acting, for the record (default: the OS user)."
)
output_option = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)
cluster_option = click.option(
    "--connect-cluster",
    default=None,
    help="Connect cluster name in offsetd.yaml (default: the only one).",
)


def _store(config_path: Path) -> tuple[Settings, ControlStore]:
    settings = load_settings(config_path)
    alias = settings.daemon_kafka_cluster()
    if alias not in settings.kafka_clusters:
        raise ConfigError(f"daemon.kafka_cluster {alias!r} is not in kafka_clusters")
    store = ControlStore.for_settings(settings)
    store.load()
    return settings, store


def _cluster(settings: Settings, name: str | None) -> str:
    names = sorted(settings.connect_clusters)
    if name is not None:
        if name not in settings.connect_clusters:
            raise ConfigError(
                f"no Connect cluster {name!r} in the config (known: {', '.join(names) or 'none'})"
            )
        return name
    if len(names) != 1:
        raise ConfigError(
            f"the config has {len(names)} Connect clusters ({', '.join(names) or 'none'}): "
            "choose one with --connect-cluster"
        )
    return names[0]


def _when(at_ms: int | None) -> str:
    if at_ms is None:
        return "-"
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


# -- approvals ----------------------------------------------------------------------------------


def _decide(config_path: Path, decision_id: str, approve: bool, by: str | None) -> None:
    _, store = _store(config_path)
    with store:
        approval = store.state.approval(decision_id)
        if approval is None:
            raise ControlRefused(
                f"no decision {decision_id} awaits approval (see `offsetd approvals`)"
            )
        if approval.status != "pending":
            raise ControlRefused(
                f"decision {decision_id} was already {approval.status} by {approval.by} "
                f"at {_when(approval.at_ms)} UTC"
            )
        decided = store.decide_approval(decision_id, approve, by or current_user())
    click.echo(
        f"{decided.status} {decision_id} ({decided.rule} on "
        f"{decided.connect_cluster}/{decided.connector}) by {decided.by}"
    )


@click.command()
@config_option
@click.argument("decision_id")
@by_option
@reports_errors
def approve(config_path: Path, decision_id: str, by: str | None) -> None:
    """Let a decision waiting in approve mode act (at the daemon's next look)."""
    _decide(config_path, decision_id, True, by)


@click.command()
@config_option
@click.argument("decision_id")
@by_option
@reports_errors
def reject(config_path: Path, decision_id: str, by: str | None) -> None:
    """Refuse a decision waiting in approve mode; it is audited as rejected."""
    _decide(config_path, decision_id, False, by)


@click.command()
@config_option
@output_option
@reports_errors
def approvals(config_path: Path, output: str) -> None:
    """Decisions waiting for `offsetd approve` / `offsetd reject`, oldest first."""
    _, store = _store(config_path)
    with store:
        pending = store.state.pending_approvals()
    if output == "json":
        emit_json(
            [
                {
                    "decision_id": a.decision_id,
                    "rule": a.rule,
                    "connect_cluster": a.connect_cluster,
                    "connector": a.connector,
                    "summary": a.summary,
                    "requested_at_ms": a.requested_at_ms,
                }
                for a in pending
            ]
        )
        return
    rows = [
        (a.decision_id, _when(a.requested_at_ms), a.rule, a.connector, a.summary) for a in pending
    ]
    click.echo(table(["decision", "requested at", "rule", "connector", "summary"], rows))


# -- breakers -----------------------------------------------------------------------------------


@click.group()
def breaker() -> None:
    """Breakers: opened when a connector fails again soon after a skip."""


@breaker.command("list")
@config_option
@output_option
@reports_errors
def breaker_list(config_path: Path, output: str) -> None:
    """Open breakers."""
    _, store = _store(config_path)
    with store:
        open_ = store.state.open_breakers()
    if output == "json":
        emit_json(
            [
                {
                    "connect_cluster": b.connect_cluster,
                    "connector": b.connector,
                    "opened_at_ms": b.at_ms,
                    "why": b.why,
                    "decision_id": b.decision_id,
                }
                for b in open_
            ]
        )
        return
    rows = [(b.connect_cluster, b.connector, _when(b.at_ms), b.why) for b in open_]
    click.echo(table(["connect cluster", "connector", "opened at", "why"], rows))


@breaker.command("reset")
@config_option
@click.argument("connector")
@cluster_option
@by_option
@reports_errors
def breaker_reset(
    config_path: Path, connector: str, connect_cluster: str | None, by: str | None
) -> None:
    """Close the breaker of a connector: offsetd may act on it again."""
    settings, store = _store(config_path)
    cluster = _cluster(settings, connect_cluster)
    with store:
        if store.state.open_breaker(cluster, connector) is None:
            raise ControlRefused(f"no open breaker for {cluster}/{connector}")
        who = by or current_user()
        store.set_breaker(cluster, connector, open=False, by=who, why=f"reset by {who}")
    click.echo(f"breaker for {cluster}/{connector} reset by {who}")


# -- pause --------------------------------------------------------------------------------------


@click.command()
@config_option
@click.option("--reason", default="", help="Why, for the record and `automation status`.")
@by_option
@reports_errors
def pause(config_path: Path, reason: str, by: str | None) -> None:
    """Pause all automatic action (decisions are still made and audited as suppressed)."""
    _, store = _store(config_path)
    with store:
        current = store.state.paused
        if current is not None:
            raise ControlRefused(
                f"automation is already paused (by {current.by} at {_when(current.at_ms)} UTC)"
            )
        who = by or current_user()
        store.set_pause(True, who, reason)
    click.echo(f"automation paused by {who}")


@click.command("resume-automation")
@config_option
@by_option
@reports_errors
def resume_automation(config_path: Path, by: str | None) -> None:
    """Lift the global pause."""
    _, store = _store(config_path)
    with store:
        if store.state.paused is None:
            raise ControlRefused("automation is not paused")
        who = by or current_user()
        store.set_pause(False, who)
    click.echo(f"automation resumed by {who}")


# -- opt-out ------------------------------------------------------------------------------------


@click.command("opt-out")
@config_option
@click.argument("connector")
@cluster_option
@click.option("--reason", default="", help="Why, for the record.")
@by_option
@reports_errors
def opt_out(
    config_path: Path, connector: str, connect_cluster: str | None, reason: str, by: str | None
) -> None:
    """Never act on this connector (until `offsetd opt-in`)."""
    settings, store = _store(config_path)
    cluster = _cluster(settings, connect_cluster)
    with store:
        if store.state.opt_out(cluster, connector) is not None:
            raise ControlRefused(f"{cluster}/{connector} is already opted out")
        who = by or current_user()
        store.set_opt_out(cluster, connector, True, who, reason)
    click.echo(f"{cluster}/{connector} opted out by {who}")


@click.command("opt-in")
@config_option
@click.argument("connector")
@cluster_option
@by_option
@reports_errors
def opt_in(config_path: Path, connector: str, connect_cluster: str | None, by: str | None) -> None:
    """Lift an `offsetd opt-out` (globs in remediation.opt_out stay in force)."""
    settings, store = _store(config_path)
    cluster = _cluster(settings, connect_cluster)
    with store:
        if store.state.opt_out(cluster, connector) is None:
            raise ControlRefused(f"{cluster}/{connector} is not opted out")
        who = by or current_user()
        store.set_opt_out(cluster, connector, False, who)
    click.echo(f"{cluster}/{connector} opted in by {who}")


# -- status -------------------------------------------------------------------------------------


@click.group()
def automation() -> None:
    """The state of automation as a whole."""


def status_document(settings: Settings, state: ControlState, now_ms: int) -> dict[str, Any]:
    """Pause, open breakers, opt-outs and skip budgets used, as one JSON-able dict."""
    budget = settings.remediation.skip_budget
    paused = state.paused
    return {
        "paused": None
        if paused is None
        else {"by": paused.by, "at_ms": paused.at_ms, "reason": paused.reason},
        "breakers": [
            {
                "connect_cluster": b.connect_cluster,
                "connector": b.connector,
                "opened_at_ms": b.at_ms,
                "why": b.why,
            }
            for b in state.open_breakers()
        ],
        "opt_outs": [
            {
                "connect_cluster": o.connect_cluster,
                "connector": o.connector,
                "by": o.by,
                "at_ms": o.at_ms,
                "reason": o.reason,
            }
            for o in state.opted_out()
        ],
        "opt_out_globs": list(settings.remediation.opt_out),
        "skip_budgets": [
            {
                "connect_cluster": cluster,
                "connector": connector,
                "used": state.skips_within(cluster, connector, now_ms, budget.per),
                "max": budget.max,
                "per_ms": budget.per,
            }
            for cluster, connector in sorted(state.skips)
            if state.skips_within(cluster, connector, now_ms, budget.per)
        ],
        "pending_approvals": len(state.pending_approvals()),
    }


@automation.command("status")
@config_option
@output_option
@reports_errors
def automation_status(config_path: Path, output: str) -> None:
    """Is automation paused; which breakers are open; opt-outs; skip budgets used."""
    settings, store = _store(config_path)
    with store:
        doc = status_document(settings, store.state, store.now_ms())
    if output == "json":
        emit_json(doc)
        return
    paused = doc["paused"]
    if paused is None:
        click.echo("automation: active")
    else:
        reason = f": {paused['reason']}" if paused["reason"] else ""
        click.echo(f"automation: PAUSED by {paused['by']} at {_when(paused['at_ms'])} UTC{reason}")
    click.echo(f"pending approvals: {doc['pending_approvals']}")
    click.echo("\nopen breakers:")
    click.echo(
        table(
            ["connect cluster", "connector", "opened at", "why"],
            [
                (b["connect_cluster"], b["connector"], _when(b["opened_at_ms"]), b["why"])
                for b in doc["breakers"]
            ],
        )
    )
    click.echo("\nopted out:")
    click.echo(
        table(
            ["connect cluster", "connector", "by", "at", "reason"],
            [
                (o["connect_cluster"], o["connector"], o["by"], _when(o["at_ms"]), o["reason"])
                for o in doc["opt_outs"]
            ],
        )
    )
    if doc["opt_out_globs"]:
        click.echo(f"opt-out globs (config): {', '.join(doc['opt_out_globs'])}")
    click.echo("\nskip budgets used:")
    click.echo(
        table(
            ["connect cluster", "connector", "used", "max", "per"],
            [
                (
                    s["connect_cluster"],
                    s["connector"],
                    s["used"],
                    s["max"],
                    f"{s['per_ms'] // 1000}s",
                )
                for s in doc["skip_budgets"]
            ],
        )
    )
