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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Check", "Health", "StreamProgress", "events_share"]


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


def events_share(
    topic: str,
    partitions: int,
    held: Iterable[int],
    distribution: Mapping[str, Mapping[str, Sequence[int]]],
) -> tuple[bool, str]:
    """Does this worker hold its share of the events topic? (ok, the sentence for /readyz).

    `held`: the events partitions assigned to this worker; `distribution`: every member's
    assigned partitions by topic, as the group's last assignment told each member (faust's
    `external_topic_distribution`, one entry per member). A worker is ready only when the
    assignment covers every partition of the topic (an assignment made on metadata without it
    covers none) and this worker holds at least its even share (all of them when alone). More
    workers than partitions leave some with none: ready, standing by, and it says so.
    """
    mine = sorted(set(held))
    members = max(len(distribution), 1)
    covered = {p for assigned in distribution.values() for p in assigned.get(topic, ())}
    if len(covered) < partitions:
        return False, (
            f"the group's assignment gives out {len(covered)} of the {partitions} partitions of "
            f"{topic} (made on metadata without them?): this worker holds {len(mine)}, "
            "so nobody hears their connectors"
        )
    share = partitions // members
    if len(mine) < share:
        return False, (
            f"holds {len(mine)} of the {partitions} partitions of {topic}, less than its share "
            f"({share}, {members} workers)"
        )
    if not mine:
        return True, (
            f"holds none of the {partitions} partitions of {topic}: {members} workers share "
            "them, this one stands by"
        )
    return True, f"holds {len(mine)} of the {partitions} partitions of {topic} ({members} workers)"


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
