"""Skip one poison record as a durable saga.

recheck -> quarantine -> snapshot -> stop -> patch -> resume -> verify.

Each step is idempotent and its completion is written to the sagas topic (awaited, acks=all)
before the next one starts, so a process killed anywhere resumes at the first step not recorded
as done and repeats nothing that matters twice:

- quarantine: the copy carries the saga key and lands in a partition chosen before the copy, so
  recovery looks for it from a recorded mark and never copies twice;
- stop and resume are idempotent in Connect;
- patch: after a crash the offsets are read first — already the target: done; still the
  before-image: write again; anything else: leave the connector STOPPED and escalate.

The offsets move only through `StepwiseBackend` (the toolkit's safe sequence, step by step, and
its client for the PATCH), so snapshots and undo work exactly as for `offsetd offsets alter`.

When Connect misbehaves mid-saga, every call is retried within `remediation.max_retries` per step
(backoff 1 s doubling to 15 s), on top of the client's own retries of 409 and of the 500 Connect
sends while a stopped sink's consumers linger:

- reads, stop and resume are idempotent: retried when Connect does not answer (timeout, refused or
  dropped connection), still refuses (409, lingering consumers), or answers a 5xx such as its own
  `Request timed out`;
- the PATCH writes absolute offsets, so it is idempotent too, but its outcome is unknown when the
  answer is lost: the offsets are read back (retried) first, and the PATCH is written again only
  while they are the before-image or the target (then it returns Connect's message, which says
  whether only the framework-managed offsets changed).

When the retries run out, the policy is docs/guards.md's: nothing written (the offsets read back as
the before-image) -> the connector is put back to its prior state, outcome `failed`; written, or
not known -> it is left STOPPED (`left_stopped`: audit, critical notification,
`offsetd_connector_left_stopped` = 1, the undo id in the message). A connector whose task fails
again on the unskipped record after being put back *is* back in its prior state (RUNNING with a
FAILED task): that is a rollback, not a connector left STOPPED.

Where each part lives: the driver and its table of steps, with the crash points between them
(`saga`); one module per step (`steps.recheck`, `quarantine`, `snapshot`, `stop`, `patch`,
`resume`, `verify`); the way back when a step fails after the stop (`rollback`); what the steps
share (`state`: the record, the plan, retries) and the saga's vocabulary (`context`). What is
not the state machine lives beside it: the action's handler (`actions.skip`), locating
(`locate`, `skip_locator`), reading records (`records`), the quarantine copy (`quarantine`,
`quarantine_format`).
"""

from offsetd.remediation.skip.context import (
    Quarantine,
    SkipAborted,
    SkipContext,
    SkipResult,
    SkipTimings,
    as_offsets_json,
)
from offsetd.remediation.skip.saga import SkipSaga
from offsetd.remediation.skip.state import T

__all__ = [
    "Quarantine",
    "SkipAborted",
    "SkipContext",
    "SkipResult",
    "SkipSaga",
    "SkipTimings",
    "T",
    "as_offsets_json",
]
