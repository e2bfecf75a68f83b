"""`offsetd history`: what the daemon decided, one row per action taken, and an incident's story.

The audit holds three kinds of records: decisions (planned; before the tallies, suppressed ones
too), the remediation layer's outcomes of them (`kind: remediation`, pointing at their decision)
and tallies of suppressed decisions (`kind: suppressed`, pointing at their incident: the planned
decision they are suppressed because of). An incident is a planned decision with both: the
table shows it as one row — its latest outcome and "N suppressed" — and `--incident` tells it in
order. Suppressions that belong to no action in view (a disabled rule, an action older than the
audit) get a row of their own. `-o json` prints the records themselves, every field.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from offsetd.audit import read_records
from offsetd.cli.common import reports_errors
from offsetd.cli.output import emit_json, table
from offsetd.cli.run import config_option
from offsetd.config import load_settings
from offsetd.errors import IncidentNotFound
from offsetd.kafkalogin import checked_config
from offsetd.outcomes import PLANNED, SUPPRESSED_KIND, suppressed_outcome

__all__ = ["HEADERS", "Incident", "history", "incident_rows", "incidents", "story"]

HEADERS = ["decided at", "rule", "mode", "outcome", "connector", "actions", "record", "suppressed"]
_REMEDIATION = "remediation"


@dataclass
class Incident:
    """A planned decision with its outcomes and the tallies of what it suppressed; or, with
    no decision, tallies of suppressions that belong to no action in view."""

    id: str
    decision: dict[str, Any] | None
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    suppressed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def head(self) -> dict[str, Any]:
        return self.decision if self.decision is not None else self.suppressed[-1]

    @property
    def suppressed_count(self) -> int:
        return sum(int(t.get("count", 1)) for t in self.suppressed)

    @property
    def outcome(self) -> str:
        if self.decision is None:
            return str(self.head.get("outcome", "?"))
        if self.outcomes:
            return str(self.outcomes[-1].get("outcome", "?"))
        return PLANNED  # no outcome yet (or a daemon that only decides)

    @property
    def decided_at_ms(self) -> int:
        return int(self.head.get("decided_at_ms", 0))

    @property
    def latest_ms(self) -> int:
        """Its latest news: the decision, an outcome or a suppression (the order of rows)."""
        return max(int(r.get("decided_at_ms", 0)) for r in _records_of(self))

    def involves(self, rule: str) -> bool:
        """Decided by `rule`, or holding back decisions of it (a restart a skip inhibits)."""
        return self.head.get("rule") == rule or any(t.get("rule") == rule for t in self.suppressed)


def incidents(records: Iterable[dict[str, Any]]) -> list[Incident]:
    """The audit's records (oldest first) as incidents, by their latest news, oldest first."""
    found: dict[str, Incident] = {}
    loose: dict[tuple[Any, ...], Incident] = {}
    outcomes: list[dict[str, Any]] = []
    tallies: list[dict[str, Any]] = []
    for record in records:
        kind = record.get("kind")
        if kind == _REMEDIATION:
            outcomes.append(record)
        elif kind == SUPPRESSED_KIND:
            tallies.append(record)
        elif record.get("outcome") == PLANNED:
            found[str(record["id"])] = Incident(str(record["id"]), record)
        else:  # a suppressed decision written one by one (an audit from before the tallies)
            tallies.append(_as_tally(record))
    for outcome in outcomes:
        incident = found.get(str(outcome.get("decision_id")))
        if incident is not None:
            incident.outcomes.append(outcome)
    for tally in tallies:
        incident = found.get(str(tally.get("incident")))
        if incident is None:
            group = (tally.get("rule"), tally.get("connect_cluster"), tally.get("connector"))
            key = (*group, tally.get("outcome"))
            incident = loose.get(key)
            if incident is None:
                incident = loose[key] = Incident(str(tally["id"]), None)
        incident.suppressed.append(tally)
    every = [*found.values(), *loose.values()]
    every.sort(key=lambda i: i.latest_ms)
    return every


def incident_rows(found: Iterable[Incident]) -> list[tuple[Any, ...]]:
    """One table row per incident (in the order given), under `HEADERS`."""
    rows = []
    for incident in found:
        head = incident.head
        count = incident.suppressed_count
        rows.append(
            (
                _when(incident.decided_at_ms),
                head.get("rule"),
                head.get("mode"),
                incident.outcome,
                head.get("connector"),
                ",".join(a.get("type", "?") for a in head.get("actions", [])),
                _where(incident.decision) if incident.decision is not None else "-",
                f"{count} suppressed" if count else "",
            )
        )
    return rows


def story(incident: Incident) -> list[str]:
    """An incident, told in order: the decision, each outcome, each tally of suppressions."""
    lines: list[tuple[int, str]] = []
    if incident.decision is not None:
        d = incident.decision
        trigger = (d.get("inputs") or {}).get("trigger") or {}
        said = f"decided {','.join(a.get('type', '?') for a in d.get('actions', []))}"
        if d.get("record"):
            said += f" of {_where(d)}"
        said += f" ({trigger.get('kind', '?')}"
        said += f" {trigger['state']})" if trigger.get("state") else ")"
        said += f"; {len((d.get('inputs') or {}).get('events', []))} event(s) counted"
        lines.append((int(d.get("decided_at_ms", 0)), said))
    for outcome in incident.outcomes:
        said = str(outcome.get("outcome"))
        if outcome.get("guard") and outcome.get("guard") != "none":
            said += f" (guard {outcome['guard']})"
        if outcome.get("message"):
            said += f": {outcome['message']}"
        lines.append((int(outcome.get("decided_at_ms", 0)), said))
    for tally in incident.suppressed:
        first, last = tally.get("first") or {}, tally.get("last") or {}
        said = f"{tally.get('outcome')} x{tally.get('count', 1)}: rule {tally.get('rule')}"
        said += f", events {_mark(first)} .. {_mark(last)}"
        if tally.get("detail"):
            said += f" ({tally['detail']})"
        lines.append((int(first.get("decided_at_ms", tally.get("decided_at_ms", 0))), said))
    lines.sort(key=lambda line: line[0])
    head = incident.head
    title = f"incident {incident.id}: rule {head.get('rule')} on "
    title += f"{head.get('connect_cluster')}/{head.get('connector')}, now {incident.outcome}"
    return [title, *(f"{_when(at, millis=True)}  {said}" for at, said in lines)]


@click.command()
@config_option
@click.option("--connector", default=None, help="Only this connector's decisions.")
@click.option("--rule", default=None, help="Only this rule's decisions.")
@click.option("--incident", "incident_id", default=None, help="Tell this incident's story.")
@click.option(
    "--limit",
    default=50,
    show_default=True,
    help="At most this many rows (incidents); with -o json, records.",
)
@click.option("--output", "-o", type=click.Choice(["table", "json"]), default="table")
@reports_errors
def history(
    config_path: Path,
    connector: str | None,
    rule: str | None,
    incident_id: str | None,
    limit: int,
    output: str,
) -> None:
    """The daemon's decisions, newest first: one row per action taken, with the decisions its
    limits suppressed counted beside it. `-o json`: the audit records themselves."""
    settings = load_settings(config_path)
    conf = checked_config(settings, settings.daemon_kafka_cluster())
    records = [
        r
        for r in read_records(conf, settings.daemon.audit_topic)
        if connector is None or r.get("connector") == connector
    ]
    # grouped before the rule is chosen: a restart a skip held back is part of the skip's story
    found = [i for i in incidents(records) if rule is None or i.involves(rule)]
    if incident_id is not None:
        chosen = _find(found, incident_id)
        if output == "json":
            emit_json(_records_of(chosen))
        else:
            click.echo("\n".join(story(chosen)))
        return
    if output == "json":
        chosen_records = (r for r in reversed(records) if rule is None or r.get("rule") == rule)
        emit_json(list(chosen_records)[:limit])
        return
    newest = list(reversed(found))[:limit]
    click.echo(table(HEADERS, incident_rows(newest)))


def _find(found: list[Incident], wanted: str) -> Incident:
    """An incident by its id or an unambiguous prefix of it (as git takes commits)."""
    matches = [i for i in found if i.id.startswith(wanted)]
    if len(matches) != 1:
        what = "no incident" if not matches else f"{len(matches)} incidents"
        raise IncidentNotFound(f"{what} with id {wanted!r} in the audit (see `offsetd history`)")
    return matches[0]


def _records_of(incident: Incident) -> list[dict[str, Any]]:
    head = [] if incident.decision is None else [incident.decision]
    return [*head, *incident.outcomes, *incident.suppressed]


def _as_tally(decision: dict[str, Any]) -> dict[str, Any]:
    """A suppressed decision of an older audit, as a tally of one."""
    mark = {
        "decision_id": decision.get("id"),
        "event_time_ms": decision.get("event_time_ms"),
        "decided_at_ms": decision.get("decided_at_ms"),
    }
    return {
        **decision,
        "kind": SUPPRESSED_KIND,
        "outcome": suppressed_outcome(str(decision.get("reason") or "disabled")),
        "count": 1,
        "incident": None,
        "first": mark,
        "last": mark,
    }


def _mark(mark: dict[str, Any]) -> str:
    if mark.get("record"):
        return str(mark["record"])
    if mark.get("topic") is not None:
        return f"{mark['topic']}-{mark['partition']}@{mark['offset']}"
    return str(mark.get("decision_id", "?"))


def _where(decision: dict[str, Any]) -> str:
    target = decision.get("record")
    if target:
        return f"{target['topic']}-{target['partition']}@{target['offset']}"
    return str(decision.get("record_status") or "-")


def _when(ms: int, *, millis: bool = False) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}" if millis else text
