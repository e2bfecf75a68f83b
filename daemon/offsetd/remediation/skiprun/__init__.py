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

No pyspark here: applying a plan needs only Kafka clients. One module a concern: `job` (the
plan's runs and their checks against the connector's position), `copier` (the idempotent copy
to the quarantine topic).
"""

from offsetd.remediation.skiprun.copier import CopyResult, RunCopier, copier_for, copy_headers
from offsetd.remediation.skiprun.job import (
    SkippedRun,
    SkipRunJob,
    check_positions,
    quarantine_context,
    skip_run_job,
    skip_run_job_of_file,
)

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
