"""`offsetd rules test`: offline rule tests in the style of `promtool test rules`.

A test file names `rule_files` (paths or globs, relative to the test file) and `tests`. Each
test feeds input events, with times, through the real engine and compares the decisions it
produced with `expect`, exactly: a decision produced but not expected fails the test (that is
how "must not happen" is written; an empty `expect` means nothing may fire).

Input events take the events model's shape with friendly defaults: `connect_cluster` is
"local", the source record (topic, partition, offset) is generated from a per-topic counter so
idempotency never swallows two inputs, the event time is `at`, and a FAILED status may give
`trace` text (parsed like a real one). `now` says when an event arrives, to simulate replays
and lag (default: `at`). `repeat`/`every` expand one entry into a series.

Pure: no Kafka, no HTTP; it reads only the files it is given. Modules: `spec` (the file's
models and the results), `inputs` (entries -> events), `run` (the engine and the comparison),
`report` (the lines printed).
"""

from offsetd.ruletest.inputs import TestInput, build_events, event_errors
from offsetd.ruletest.report import describe_decision, format_result
from offsetd.ruletest.run import run_test_file
from offsetd.ruletest.spec import CaseResult, FileResult, TestEvent, TestFile

__all__ = [
    "CaseResult",
    "FileResult",
    "TestEvent",
    "TestFile",
    "TestInput",
    "build_events",
    "describe_decision",
    "event_errors",
    "format_result",
    "run_test_file",
]
