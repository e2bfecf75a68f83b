"""Ids seen recently, kept for a bounded time and number.

The executor hands each decision over once per process. A set of every id ever seen grows for
the life of a daemon meant to run for months; the ids only have to outlive the ways the same
decision can come back: the start-up scan of the audit (decisions of the last hour) and a
replay of the events (a record older than its rule's window never fires). A day covers both by
far; the size cap bounds memory even in a storm of decisions.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

__all__ = ["DAY_MS", "RecentIds"]

DAY_MS = 86_400_000


class RecentIds:
    """`id in ids` / `ids.add(id)`, forgetting ids older than `keep_ms` or beyond `max_ids`."""

    def __init__(
        self, now_ms: Callable[[], int], *, keep_ms: int = DAY_MS, max_ids: int = 100_000
    ) -> None:
        if keep_ms <= 0 or max_ids <= 0:
            raise ValueError(f"keep_ms and max_ids must be positive ({keep_ms}, {max_ids})")
        self._now_ms = now_ms
        self._keep_ms = keep_ms
        self._max_ids = max_ids
        self._added: OrderedDict[str, int] = OrderedDict()  # id -> when added, oldest first

    def __contains__(self, item: object) -> bool:
        self._forget_old()
        return item in self._added

    def __len__(self) -> int:
        self._forget_old()
        return len(self._added)

    def add(self, item: str) -> None:
        self._added[item] = self._now_ms()
        self._added.move_to_end(item)
        while len(self._added) > self._max_ids:
            self._added.popitem(last=False)
        self._forget_old()

    def _forget_old(self) -> None:
        horizon = self._now_ms() - self._keep_ms
        while self._added:
            oldest, added = next(iter(self._added.items()))
            if added >= horizon:
                return
            del self._added[oldest]
