"""The owner's work on a batch of raw records of one connector: decode, decide, in order.

Used by app.py for each internal record (one frame of `offsetd.events.frames`) and by the bench,
so both run the same code. One state for the whole batch: it is read once before and written
once after (see `StateCache`), where the per-event path read and wrote ~10 KB of JSON per event.

- A record at or below the high-water offset of its source partition in the state is a replay:
  skipped before it is even decoded (`decide` would ignore it too).
- A record the decoder rejects is reported to `on_malformed` (count it, log it with its
  coordinates) and skipped; so is a record the decoder or `decide` fails on otherwise (a bug:
  `on_error`; without it the exception propagates). One bad record never stops the batch.
Pure: no I/O; the callers do the audit and the metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from offsetd.engine.decide import _decide, decide
from offsetd.engine.decision import Firing
from offsetd.engine.state import ConnectorState
from offsetd.events.decode import Malformed, RawRecord
from offsetd.rules.matching import RuleSet
from offsetd.rules.models import ConnectorMeta

__all__ = ["Decoder", "decide_batch"]

Decoder = Callable[[RawRecord], Any]
"""A raw record -> its event (raises `Malformed`)."""


def decide_batch(
    state: ConnectorState,
    records: Sequence[RawRecord],
    decoder: Decoder,
    rules: RuleSet,
    meta: Callable[[Any], ConnectorMeta | None],
    now_ms: Callable[[Any], int],
    *,
    on_match: Callable[[str], None] | None = None,
    on_event: Callable[[Any], None] | None = None,
    on_malformed: Callable[[RawRecord, Malformed], None] | None = None,
    on_error: Callable[[RawRecord, Exception], None] | None = None,
    light: bool = True,
) -> tuple[int, list[Firing]]:
    """Apply `records` (one connector's, in order) to `state` in place.

    Returns how many events were applied (0: nothing changed, the state need not be written)
    and the firings, in order (`light`: suppressed ones as `Suppression`s, `decide_firings`).
    `meta(event)` and `now_ms(event)` are asked per event (the connector's metadata may be
    refreshed, "now" moves on).
    """
    offsets = state.offsets
    applied = 0
    decisions: list[Firing] = []
    for raw in records:
        seen = offsets.get(f"{raw.topic}:{raw.partition}")
        if seen is not None and raw.offset <= seen:
            continue  # a replay: counted already
        try:
            event = decoder(raw)
            if on_event is not None:
                on_event(event)
            if light:  # decide_firings, one call less
                known = meta(event)
                made = _decide(state, event, rules, known, now_ms(event), on_match, light=True)
            else:
                state, decided = decide(state, event, rules, meta(event), now_ms(event), on_match)
                made = list(decided)
        except Malformed as bad:
            if on_malformed is not None:
                on_malformed(raw, bad)
            continue
        except Exception as exc:
            if on_error is None:
                raise
            on_error(raw, exc)
            continue
        applied += 1
        if made:
            decisions.extend(made)
    return applied, decisions
