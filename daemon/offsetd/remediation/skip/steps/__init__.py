"""The skip saga's steps, one module each, in the order of `offsetd.remediation.sagas.STEPS`.

Every step is `async run(state) -> changes`: the fields its completion records on the saga
(`SagaRecord.step_done`). A step raises `SkipAborted` when nothing was changed and `Escalate`
for any other end; the driver (`offsetd.remediation.skip.saga`) records progress and holds the
crash points between them.
"""

__all__: list[str] = []
