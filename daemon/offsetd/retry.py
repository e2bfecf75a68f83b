"""The one retry policy: ask an idempotent call again while its error says that can help.

Every retry in offsetd goes through `retry_call`: the Connect client's own retries of
Connect's transient refusals (409, a rebalance), the executor's single actions and guard reads,
the skip saga's steps. What is retried is decided by the error's typed mark (`OffsetdError.
retriable`, see `offsetd.errors`), never by its text; how long to wait by a sequence of delays
(`Backoff`, or a caller's own); what is said between tries by `before_retry`. The last error
is raised as it is, and no delays means one try.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from offsetd.errors import is_retriable

__all__ = ["Backoff", "doubling", "retry_blocking", "retry_call"]

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """`attempts` tries, the delays between them doubling from `first_s` up to `max_s`."""

    attempts: int = 8
    first_s: float = 0.5
    max_s: float = 5.0

    def delays(self) -> Iterator[float]:
        return doubling(self.first_s, self.max_s, self.attempts - 1)


def doubling(first_s: float, max_s: float, count: int) -> Iterator[float]:
    """`count` delays: `first_s`, then doubled each time, never above `max_s`."""
    delay = first_s
    for _ in range(count):
        yield delay
        delay = min(delay * 2, max_s)


async def retry_call(
    call: Callable[[], Awaitable[T]],
    delays: Iterable[float],
    *,
    retriable: Callable[[BaseException], bool] = is_retriable,
    before_retry: Callable[[Exception, int, float], Awaitable[None] | None] | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """`call` until it answers; after a `retriable` error, `before_retry(error, attempt,
    delay)`, a pause of the next delay, and again. Any other error, and the one after the
    last delay, is raised."""
    pauses = iter(delays)
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as exc:
            if not retriable(exc):
                raise
            delay = next(pauses, None)
            if delay is None:
                raise
            if before_retry is not None:
                said = before_retry(exc, attempt, delay)
                if said is not None:
                    await said
            await sleep(delay)
            attempt += 1


def retry_blocking(
    call: Callable[[], T],
    delays: Iterable[float],
    *,
    retriable: Callable[[BaseException], bool] = is_retriable,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`retry_call` for a blocking call made in a worker thread (librdkafka's consumer calls):
    the same policy — a `retriable` error is asked again after the next delay, any other error
    and the one after the last delay are raised."""
    pauses = iter(delays)
    while True:
        try:
            return call()
        except Exception as exc:
            if not retriable(exc):
                raise
            delay = next(pauses, None)
            if delay is None:
                raise
            sleep(delay)
