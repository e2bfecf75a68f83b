"""Locate the record a FAILED sink task died on, exactly, or say why it cannot be done.

A sink's committed offset C is only where the failed *batch* started: records C..N-1 before the
poison record N were converted but never delivered (reference/connect-offsets.md §6), so skipping
from C loses good records. The record is located, in this order:

1. the decision names it (`record_status == "exact"`: the DLQ's `__connect.errors.*` headers);
2. one-record batches: the connector is reconfigured with `consumer.override.max.poll.records=1`
   (when the worker's override policy allows it; asked first through config/validate, which
   changes nothing), its failed tasks are restarted, and once a task is seen alive and then
   FAILED again, every record before the poison one has been delivered and committed on its own,
   so the committed offset *is* the failing record. The original config is put back afterwards
   whatever happened, and compared;
3. a rule-supplied check (`offsetd.recordchecks`) of the record at C: C is the poison
   record only if it fails the check; a first failing record after C means the records between
   were never delivered (`undelivered_prefix`), and nothing is located.

A partition the sink has committed nothing on yet (a new sink whose first record is poison) has
no committed offset to read: before its task is restarted the consumer's own start there is
written as the group's offset (`offsetd.remediation.sink_start`: the log start for `earliest`,
the log end when the failed run began for `latest`), so the restart begins where the failed run
did, and the answer says which start it used.

A task reading several partitions cannot say which one failed; a partition can be ruled out only
when its committed offset is already at its end (no record left to fail on). If more than one
remains, the answer is `ambiguous_partition`. In doubt the answer is always NotLocated: not
acting loses nothing, a wrong skip loses a good record.

One module a concern: `find` (the entry point and the order), `batches` (one-record batches),
`check` (a rule's check), `sink` (the FAILED sink's readings and `pick_partition`), `starts`
(a consumer's start where nothing is committed), `override` (the one-record key and restoring
it), `source` (the cluster a sink reads), `proof` (whether its configuration is known to
handle records), `model` (what locating answers).
"""

from offsetd.remediation.locate.find import locate, pin_latest_start
from offsetd.remediation.locate.model import (
    ConfigNotRestored,
    LocateAnswer,
    Located,
    LocateResult,
    NotLocated,
    NotLocatedReason,
    committed_by_partition,
)
from offsetd.remediation.locate.override import MAX_POLL_RECORDS_KEY, restore_override
from offsetd.remediation.locate.sink import pick_partition
from offsetd.remediation.locate.source import source_config

__all__ = [
    "MAX_POLL_RECORDS_KEY",
    "ConfigNotRestored",
    "LocateAnswer",
    "LocateResult",
    "Located",
    "NotLocated",
    "NotLocatedReason",
    "committed_by_partition",
    "locate",
    "pick_partition",
    "pin_latest_start",
    "restore_override",
    "source_config",
]
