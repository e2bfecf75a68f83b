"""What `/healthz` and `/readyz` answer: is the worker alive, and can it do its work now.

Liveness and readiness are kept apart on purpose. A daemon that cannot reach Kafka or Connect
is not broken — restarting it would only lose its state and join the group again — so those
make it *unready* (Kubernetes stops counting it as available and the PodDisruptionBudget holds),
never *dead*. Only a worker that can no longer make progress by itself is dead: its ingest
thread ended (the worker stops with it) or its event loop stopped turning.

Each readiness check is fed by a probe that runs on its own timer (`app.build`); a page only
reads the last results, so a scrape never waits on Kafka. A probe result older than
`stale_after_ms` counts as failed: a probe that hangs must not keep an old "ok" alive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Check", "Health", "StreamProgress"]


@dataclass
class Check:
    """The last result of one probe."""

    ok: bool = False
    detail: str = "not checked yet"
    at_ms: int | None = None


@dataclass
class StreamProgress:
    """Whether the worker's share of the events topic moves: stalled when records wait on a
    partition whose position has not moved for `stall_after_ms`."""

    stall_after_ms: int
    _seen: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    def observe(self, positions: Iterable[tuple[str, int, int, int]], now_ms: int) -> list[str]:
        """(topic, partition, position, highwater) per assigned partition -> the stalled ones."""
        stalled: list[str] = []
        current: dict[tuple[str, int], tuple[int, int]] = {}
        for topic, partition, position, highwater in positions:
            key = (topic, partition)
            last_position, since_ms = self._seen.get(key, (position, now_ms))
            if position != last_position:
                since_ms = now_ms
            current[key] = (position, since_ms)
            behind = highwater - position
            if behind > 0 and now_ms - since_ms >= self.stall_after_ms:
                stalled.append(
                    f"{topic}-{partition}: {behind} records waiting, position {position} "
                    f"unchanged for {(now_ms - since_ms) // 1000}s"
                )
        self._seen = current  # partitions given away are forgotten
        return stalled


@dataclass
class Health:
    """The readiness checks of one worker, and its liveness."""

    clock: Callable[[], int]
    stale_after_ms: int
    checks: dict[str, Check] = field(default_factory=dict)
    fatal: str | None = None  # why the worker can no longer work (liveness fails)

    def record(self, name: str, ok: bool, detail: str = "ok") -> None:
        self.checks[name] = Check(ok, detail, self.clock())

    def expect(self, names: Iterable[str]) -> None:
        """Checks that must pass before the worker is ready, even before their first probe."""
        for name in names:
            self.checks.setdefault(name, Check())

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the page's JSON body): every check ok and fresh."""
        now = self.clock()
        body: dict[str, Any] = {}
        ready = self.fatal is None
        for name, check in sorted(self.checks.items()):
            ok, detail = check.ok, check.detail
            if check.at_ms is not None and now - check.at_ms > self.stale_after_ms:
                ok, detail = False, f"no probe result for {(now - check.at_ms) // 1000}s"
            body[name] = {"ok": ok, "detail": detail}
            ready = ready and ok
        return ready, {"ready": ready, "checks": body}

    def liveness(self) -> tuple[bool, dict[str, Any]]:
        alive = self.fatal is None
        return alive, {"alive": alive, "detail": self.fatal or "ok"}
