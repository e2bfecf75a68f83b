"""The daemon's `rewind` action: move a connector back to a time, or to a plan file, safely.

The target is resolved by the offsets toolkit, never here: a time by one batched ListOffsets
(`offsetd.offsets.retarget.target_patch`, exactly what `offsetd offsets alter --to-timestamp`
does), a plan file by `offsetd.offsets.rewind_plan.load_plan` (what `offsetd rewind plan`
wrote, its hash checked). The change itself goes through `StepwiseBackend`'s steps — snapshot
(the undo id), stop, wait STOPPED with no tasks, write, read back, restore the prior state —
the same steps the skip saga uses, so `offsetd offsets undo <id>` works for a rewind like
for any change.

Why not `StepwiseBackend.execute` in one go: a PATCH reply that only the framework-managed
offsets changed must leave the connector STOPPED (the rewind is unverified), and `execute`
would resume it. And why a saga record: a daemon killed between the stop and the resume must
not leave the connector STOPPED without anyone knowing. Progress goes to the sagas topic
(`rewind/<cluster>/<connector>/<decision id>`) before the stop and after each step; a restarted
daemon finishes it (`recover`): offsets still the before-image or already the target -> the
prior state is restored; anything else -> left STOPPED, loudly.

One module a concern: `target` (what the rewind moves to, checked; pure), `runner` (the
action run: resolve, quarantine a skip-run, plan), `saga` (the durable steps, with the crash
points), `recovery` (finishing an interrupted one). The action's handler is `actions.rewind`,
the offsets work is the `rest` backend's.
"""

from offsetd.remediation.rewind.recovery import recovery_step
from offsetd.remediation.rewind.runner import RewindRunner
from offsetd.remediation.rewind.saga import RewindResult
from offsetd.remediation.rewind.target import (
    REWIND_STEPS,
    RewindRefused,
    RewindSpec,
    plan_entries,
    rewind_key,
    rewind_spec,
)

__all__ = [
    "REWIND_STEPS",
    "RewindRefused",
    "RewindResult",
    "RewindRunner",
    "RewindSpec",
    "plan_entries",
    "recovery_step",
    "rewind_key",
    "rewind_spec",
]
