"""After an MM2 reset or rewind: the MirrorSourceConnector replicates again (`offsets reset
--mm2`), seen in its offsets through any backend's reader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from offsetd.errors import ChangeIncomplete
from offsetd.offsets.backend import OffsetsReader, Timeouts
from offsetd.offsets.change import Outcome
from offsetd.offsets.model import as_map

__all__ = ["replicating_again"]


async def replicating_again(
    reader: OffsetsReader, outcome: Outcome, timeouts: Timeouts, log: Callable[[str], None]
) -> None:
    """Every touched partition shows progress again.

    A reset partition must reappear (MM2 wrote a new offset for it); a moved one must show
    an offset at or past where it was set. A partition whose source log holds nothing new
    cannot show progress, so only partitions present before the change are waited for.
    """
    plan = outcome.plan
    touched = plan.before if plan.patch is None else (plan.writes or ())
    expected = {e.key: e for e in touched}
    pending = set(expected)

    async def progressed() -> bool:
        now = as_map(await reader.offsets(plan.connector))
        for key in list(pending):
            seen, wanted = now.get(key), expected[key]
            if seen is None:
                continue
            floor = -1 if plan.patch is None or wanted.offset is None else wanted.offset["offset"]
            if int(seen.offset["offset"]) >= int(floor):  # type: ignore[index, arg-type]
                pending.discard(key)
        return not pending

    deadline = time.monotonic() + timeouts.resume_s
    while not await progressed():
        if time.monotonic() >= deadline:
            raise ChangeIncomplete(
                f"{plan.connector} is RUNNING but shows no replication progress within "
                f"{timeouts.resume_s:g} s on {len(pending)} partitions "
                f"(e.g. {sorted(pending)[0]}); snapshot {outcome.snapshot_id}"
            )
        await asyncio.sleep(timeouts.poll_s)
    log(f"{plan.connector} replicates again on all {len(expected)} touched partitions")
