"""What a skip saga runs with and what it returns: its context, timings, result and its two
ways to stop early (`SkipAborted`: nothing changed; `Escalate`: a terminal status to record).

Kept apart from the steps so every step module, the rollback path and the driver share one
vocabulary without importing one another.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from offsetd.connect.client import ConnectClient
from offsetd.errors import OffsetdError
from offsetd.offsets.backend import StepwiseBackend
from offsetd.offsets.model import OffsetEntry
from offsetd.remediation.sagas import SagaRecord, SagaStore, Status

__all__ = [
    "Escalate",
    "Quarantine",
    "SkipAborted",
    "SkipContext",
    "SkipResult",
    "SkipTimings",
    "as_offsets_json",
]


class SkipAborted(OffsetdError):
    """A precondition no longer holds, or a step failed before anything was changed."""

    exit_code = 45


class Quarantine(Protocol):
    """Where skipped records are kept whole (see `offsetd.remediation.quarantine`)."""

    def mark(self, saga_key: str) -> dict[str, int]: ...

    def copy_once(
        self,
        saga_key: str,
        mark: dict[str, int],
        record: dict[str, Any],
        context: dict[str, str],
        connector_config: Mapping[str, str],
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class SkipTimings:
    verify_stable_for_s: float = 120.0
    poll_s: float = 1.0
    max_retries: int = 5
    retry_first_s: float = 1.0
    retry_max_s: float = 15.0
    settle_s: float = 20.0
    # The decision often comes from the DLQ record, ~0.5 s before Connect reports the task FAILED:
    # the recheck looks often while it waits for that (a GET /status each time).
    settle_poll_s: float = 0.05


@dataclass(frozen=True)
class SkipContext:
    """What the saga needs besides its record: clients, stores and the error to quarantine with."""

    client: ConnectClient
    offsets: StepwiseBackend
    store: SagaStore
    quarantine: Quarantine
    timings: SkipTimings
    error_context: dict[str, str]  # __connect.errors.* style context for the quarantine copy
    expected_error: str | None  # an exception class the failing task's trace must still name
    mirror_source_alias: str | None = None  # MirrorSourceConnector: its source.cluster.alias
    now_ms: Callable[[], int] = lambda: int(time.time() * 1000)


@dataclass(frozen=True)
class SkipResult:
    record: SagaRecord
    status: Status
    message: str
    before: tuple[OffsetEntry, ...] = ()
    after: tuple[OffsetEntry, ...] = ()
    left_stopped: bool = False
    verify_failed: bool = False  # the connector failed again after the skip (breaker input)
    stopped_s: float = 0.0


class Escalate(Exception):
    """A step ends the saga with `status` (`failed`, `left_stopped`): raised by a step, recorded
    by the driver (`offsetd.remediation.skip.saga`)."""

    def __init__(self, status: Status, message: str, *, verify_failed: bool = False) -> None:
        super().__init__(message)
        self.status: Status = status
        self.message = message
        self.verify_failed = verify_failed


def as_offsets_json(entries: tuple[OffsetEntry, ...]) -> list[dict[str, Any]]:
    return [e.as_json() for e in entries]
