"""Decoded connector states kept in memory in front of their durable JSON text (the Table).

Parsing a state from JSON costs ~100 us at the 10 KB a busy sink reaches, more than parse,
match and decide of an event together, and the owner of a connector is the only writer of its
state. So the owner keeps `key -> (text it wrote, state)` and reuses the state as long as the
store still holds *that very text object* (`is`, not `==`): faust's memory store hands back the
object that was set, while changelog recovery or a rebalance puts another object there, and
then the state is parsed again. `get` hands out the cached object itself (updated in place by
`decide`): after a failure mid-update the caller `forget`s it, and the next `get` re-reads the
durable text. Pure: the store is any mutable mapping.

A state may be held as the compiled engine's (`offsetd.engine.compiled`): both write the same
JSON, so `get` and `get_compiled` each read the other's text when the connector switches
engines (a frame the compiled path leaves to Python), and reuse their own object otherwise.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from offsetd.engine.compiled import compiled_state
from offsetd.engine.state import ConnectorState

__all__ = ["StateCache"]


class StateCache:
    """`get(key)` the state to work on, `put(key, state)` it back (written to the store)."""

    __slots__ = ("_live", "_store", "hits", "misses")

    def __init__(self, store: MutableMapping[str, Any]) -> None:
        self._store = store
        self._live: dict[str, tuple[str, Any]] = {}  # a ConnectorState or a compiled State
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> ConnectorState:
        """The state to work on: the decoded one while the store holds the text written with
        it, else parsed from the store (and remembered with that text)."""
        stored, cached = self._lookup(key, compiled=False)
        if cached is not None:
            return cached  # type: ignore[no-any-return]  # a ConnectorState, by `_lookup`
        state = ConnectorState.from_json(stored) if stored else ConnectorState()
        self._remember(key, stored, state)
        return state

    def get_compiled(self, key: str) -> Any:
        """`get` for the compiled engine: its state (an `offsetd_native.State`), or None when
        it cannot continue the stored one exactly (the Python engine decides, `get`)."""
        stored, cached = self._lookup(key, compiled=True)
        if cached is not None:
            return cached
        state = compiled_state(stored)
        self._remember(key, stored, state)
        return state

    def _lookup(self, key: str, *, compiled: bool) -> tuple[Any, Any]:
        """(the stored text, the decoded state of the asked engine while the store still holds
        the text written with it, else None: a miss, to be parsed)."""
        stored = self._store.get(key)
        cached = self._live.get(key)
        if (
            cached is not None
            and stored is not None
            and cached[0] is stored
            and (type(cached[1]) is not ConnectorState) is compiled
        ):
            self.hits += 1
            return stored, cached[1]
        self.misses += 1
        return stored, None

    def _remember(self, key: str, stored: Any, state: Any) -> None:
        """Keep `state` decoded from the stored text (nothing stored, or no state: forget)."""
        if stored and state is not None:
            self._live[key] = (stored, state)
        else:
            self._live.pop(key, None)

    def put(self, key: str, state: Any) -> None:
        """Write `state` (a ConnectorState, or a compiled State) to the store (as JSON text)
        and keep it decoded."""
        text = state.to_json()
        self._store[key] = text
        self._live[key] = (text, state)

    def forget(self, key: str) -> None:
        """Drop the decoded copy (after a failure mid-update): the next `get` parses the store."""
        self._live.pop(key, None)
