"""`offsetd offsets list` and `export`: what the connectors' offsets are now."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from offsetd.cli.common import connect_options, reports_errors
from offsetd.cli.offsets.choose import (
    backend_of,
    online_backend_of,
    say,
    target_of,
    with_client,
)
from offsetd.cli.offsets.present import list_offsets
from offsetd.offsets import documents
from offsetd.offsets.backend import OfflineOptions

__all__ = ["export", "list_", "names_of"]


def names_of(connectors: tuple[str, ...], connectors_csv: str | None, all_: bool) -> list[str]:
    names = list(connectors) + [n.strip() for n in (connectors_csv or "").split(",") if n.strip()]
    if names and all_:
        raise click.UsageError("name connectors or use --all, not both")
    return names


@click.command("list")
@click.argument("connectors", nargs=-1)
@click.option("--connectors", "connectors_csv", default=None, help="Comma-separated names.")
@click.option("--all", "all_", is_flag=True, help="Every connector (the default with no names).")
@click.option("--offline", is_flag=True, help="Read the offsets topic directly, not via REST.")
@click.option(
    "--from-beginning",
    is_flag=True,
    help="--offline: show every record of the offsets topic, in log order.",
)
@connect_options
@reports_errors
def list_(
    connectors: tuple[str, ...],
    connectors_csv: str | None,
    all_: bool,
    offline: bool,
    from_beginning: bool,
    **kw: Any,
) -> None:
    """Show the offsets of one connector, several, or all."""
    target = target_of(**kw)
    # --from-beginning reads the topic's history, which only the offsets topic has
    backend = backend_of(target, OfflineOptions() if offline or from_beginning else None)
    names = names_of(connectors, connectors_csv, all_)
    show = with_client(target, lambda: list_offsets(backend, target, names, from_beginning))
    show()


@click.command()
@click.option("--connectors", "connectors_csv", default=None, help="Comma-separated names.")
@click.option("--all", "all_", is_flag=True, help="Every connector (the default).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["kip199", "strimzi-configmap"]),
    default="kip199",
    show_default=True,
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write here instead of stdout.",
)
@connect_options
@reports_errors
def export(connectors_csv: str | None, all_: bool, fmt: str, out: Path | None, **kw: Any) -> None:
    """Export offsets as KIP-199's document or as Strimzi ConfigMaps."""
    kw["output"] = "json"
    target = target_of(**kw)
    backend = online_backend_of(target)
    names = names_of((), connectors_csv, all_)
    found = with_client(target, lambda: backend.list_offsets(names))
    if fmt == "kip199":
        text = json.dumps(documents.export_document(found), indent=2) + "\n"
    else:
        text = documents.configmaps(found)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        say(f"wrote offsets of {len(found)} connectors to {out}")
