"""`offsetd rewind plan`: rewind targets computed from the data itself, with Spark.

The plan is computed here and applied elsewhere, by the same offsets toolkit as every other
change: `offsetd offsets import --dry-run plan.json` shows the diff, without --dry-run it
stops the connector, patches, resumes and verifies. pyspark is imported only when a plan is
computed, so the rest of the CLI works without the `spark` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from offsetd.cli.common import Target, connect_options, reports_errors, resolve_target, run_async
from offsetd.cli.output import emit_json
from offsetd.config import SparkSettings
from offsetd.errors import InvalidDocument
from offsetd.offsets.rewind_plan import Mode, render_summary, write_plan
from offsetd.offsets.targets import parse_timestamp
from offsetd.spark.errors import SparkJobFailed

__all__ = ["plan", "rewind"]


@click.group()
def rewind() -> None:
    """Rewind plans from the data itself (a Spark SQL predicate over the records)."""


def _when(option: str, text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except InvalidDocument as exc:  # the toolkit's message names --to-timestamp
        raise click.BadParameter(str(exc).replace("--to-timestamp", option)) from None


def _say(message: str) -> None:
    click.echo(f"[offsetd] {message}", err=True)


_PLAN_HELP = """Compute a rewind plan for CONNECTOR by scanning its records with Spark.

\b
The predicate is a Spark SQL expression over the columns
  key, value, headers, topic, partition, offset, timestamp, value_corrupt
`value` is the raw bytes, or with --value-schema the JSON value parsed by from_json
(permissive: malformed JSON gives nulls and value_corrupt = true). A predicate that is
NULL does not match. reflect/java_method/try_reflect, UDFs and subqueries are refused.

\b
Modes (per partition; partitions without a match keep their offset):
  first-match       restart at the first matching record (re-deliver from it)
  after-last-match  restart just after the last matching record
  skip-run          skip the run of matching records that starts at the committed
                    offset; refused when the matches are not one such run

\b
The scan covers [--from-timestamp, --to-timestamp) of every partition the connector reads
(sink: topics/topics.regex; MirrorSourceConnector: its source topics); skip-run starts at
the committed offset instead. Writes OUT (an offsets document) and OUT's .summary.json.

A time-only target needs no scan: use `offsetd offsets alter --to-timestamp` (ListOffsets).
Spark runs on spark.master of offsetd.yaml (default local[2], with Spark's Kafka source from
the local jar cache); on a cluster set spark.conf's spark.jars.packages.

\b
Example:
  offsetd rewind plan --connector orders-sink --mode first-match \\
    --predicate 'value.order_id > 1000' --value-schema 'order_id INT, status STRING' \\
    --from-timestamp 2026-11-21T14:02:00Z --out plan.json
  offsetd offsets import --dry-run plan.json    # the diff
  offsetd offsets import plan.json              # stop, patch, resume, verify
"""


@rewind.command(help=_PLAN_HELP)
@click.option("--connector", required=True, help="The sink or MirrorSourceConnector to rewind.")
@click.option("--predicate", required=True, help="Spark SQL boolean expression (see above).")
@click.option(
    "--mode",
    type=click.Choice([str(m) for m in Mode]),
    default=str(Mode.FIRST_MATCH),
    show_default=True,
)
@click.option("--from-timestamp", default=None, help="Scan from this time (ISO 8601 or epoch ms).")
@click.option("--to-timestamp", default=None, help="Scan up to this time, exclusive.")
@click.option(
    "--value-schema", default=None, help="DDL of the JSON value, e.g. 'id INT, s STRING'."
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Where to write the plan (an offsets document).",
)
@click.option("--master", default=None, help="Spark master (default: spark.master in the config).")
@click.option(
    "--max-records-per-task",
    type=click.IntRange(min=1000),
    default=1_000_000,
    show_default=True,
    help="Split partitions into Spark tasks of at most this many records.",
)
@connect_options
@reports_errors
def plan(
    connector: str,
    predicate: str,
    mode: str,
    from_timestamp: str | None,
    to_timestamp: str | None,
    value_schema: str | None,
    out: Path,
    master: str | None,
    max_records_per_task: int,
    **kw: Any,
) -> None:
    # pyspark (the `spark` extra) loads only when a plan is computed, not for every command.
    try:
        from offsetd.spark.job import ScanRequest, compute_plan  # noqa: PLC0415
    except ImportError as exc:
        raise SparkJobFailed(
            f"offsetd rewind plan needs pyspark ({exc}): install offsetd with the spark extra"
        ) from None
    from offsetd.spark.resolve import resolve  # noqa: PLC0415

    chosen = Mode(mode)
    if chosen is Mode.SKIP_RUN and from_timestamp is not None:
        raise click.UsageError("skip-run starts at the committed offset: drop --from-timestamp")
    from_ts = _when("--from-timestamp", from_timestamp)
    to_ts = _when("--to-timestamp", to_timestamp)
    if from_ts is not None and to_ts is not None and to_ts <= from_ts:
        raise click.UsageError("--to-timestamp must be after --from-timestamp")
    target: Target = resolve_target(**kw)

    async def work() -> Any:
        async with target.client:
            return await resolve(
                target.client, target.worker, target.settings, connector, chosen, from_ts, to_ts
            )

    _say(f"{connector}: resolving partitions and offset ranges")
    resolved = run_async(work())
    settings = target.settings.spark if target.settings is not None else SparkSettings()
    request = ScanRequest(
        predicate, chosen, value_schema, from_ts, to_ts, master, max_records_per_task
    )
    result = compute_plan(settings, resolved, request, _say)
    side = write_plan(result, out)
    if target.output == "json":
        emit_json(result.summary)
    else:
        click.echo(render_summary(result.summary))
    _say(f"wrote {out} and {side}; check it with: offsetd offsets import --dry-run {out}")
