"""The owner's side of the events topic: frames decided, nudges applied, decisions written.

For each internal record, one connector's (`decide_frame`): a frame of raw records is decoded
(malformed ones counted, logged, skipped), filtered by the deployment's scope, run through the
engine on the connector's state, and its decisions written to the audit before the state is put
back once per frame: planned decisions one record each, awaited (and written again until the audit
takes them: a frame given up would lose them), and suppressed ones counted into
one record per rule, reason, incident and window (`engine.tally`), awaited with the planned ones
of their frame and otherwise not (`AuditLog.write_soon`: a storm's frames must not each wait for
the broker; after a start the tallies of every state are written once more, `rewrite_tallies`).
Only the planned decisions are handed to the remediator. A nudge brings what was learnt later —
an executor's outcome (`engine.later.settle`: a decision that did not run gives its limits back)
or "this connector's metadata is known now" (its deferred events are decided) — so the state
keeps one writer.

Which engine decides a frame: the compiled one (`offsetd.engine.compiled`, native/) when it is
installed, holds the rule set and `daemon.compiled_engine` is on, for every frame it can decide
exactly; the Python engine, the reference, for the others (a record or an answer the compiled
path leaves, events waiting for metadata that is known now) and for every nudge. Both write the
same state JSON (`StateCache` holds either) and hand the same things to `offsetd.app.decided`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from itertools import chain, repeat
from typing import Any, cast

from pydantic import ValidationError

from offsetd.app.counters import EventCounters, LaterMetrics
from offsetd.app.decided import compiled_decided, python_decided, write_decided
from offsetd.app.metadata import MetadataReader, Nudge
from offsetd.app.wiring import Decoder, Wiring
from offsetd.engine import Decision
from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.engine.compiled import CompiledOwner, frame_summary
from offsetd.engine.decide import decide_firings
from offsetd.engine.decision import Firing
from offsetd.engine.later import (
    PENDING_OUTCOMES,
    OutcomeNews,
    did_not_run,
    outcome_news,
    redecide_deferred,
    settle,
)
from offsetd.engine.state import ConnectorState
from offsetd.engine.tally import tally_record
from offsetd.events.decode import Malformed, RawRecord
from offsetd.events.frames import decode_frame, decode_nudge
from offsetd.events.models import ProgressEvent, owner_key
from offsetd.retry import doubling
from offsetd.scope import scope_of, split_owner_key

__all__ = ["FrameDecider"]

log = logging.getLogger("offsetd")
_CONNECTOR_STATUS = b"status-connector-"
AUDIT_RETRY_MAX_S = 30.0


class FrameDecider:
    """Decides what the events topic brings, for the connectors this worker owns."""

    def __init__(
        self,
        wiring: Wiring,
        cache: StateCache,
        events_name: str,
        nudge: Nudge,
        later: LaterMetrics,
    ) -> None:
        self.wiring = wiring
        self.cache = cache
        self.events_name = events_name
        self.counters = EventCounters(wiring.metrics, since_ms=wiring.clock())
        self.later = later
        self.nudge = nudge
        self.metadata = MetadataReader(wiring, nudge)
        self.sources: dict[str, tuple[str, Decoder]] = wiring.source_topics()
        self._tallies_rewritten: set[str] = set()  # keys whose tallies were written since start
        self.compiled = self._compiled_owner()

    def _compiled_owner(self) -> CompiledOwner | None:
        """The compiled owner of the rules, or None (the Python engine decides every frame);
        said once, with why."""
        wiring = self.wiring
        settings = wiring.settings.daemon
        if not settings.compiled_engine:
            owner, why = None, "daemon.compiled_engine is off"
        else:
            owner, why = CompiledOwner.create(
                wiring.rules, wiring.compiled_topics(), settings.suppressed_window
            )
        if owner is None:
            log.info("frames are decided by the Python engine: %s", why)
        else:
            log.info(
                "frames are decided by the compiled engine (the Python engine decides those "
                "it leaves, and the nudges)"
            )
        return owner

    @staticmethod
    def audit_retry_delays() -> Iterator[float]:
        """Pauses between writes of planned decisions the audit refused: 1 s doubling to 30 s,
        then every 30 s, without end (see `decide_all`)."""
        return chain(doubling(1.0, AUDIT_RETRY_MAX_S, 5), repeat(AUDIT_RETRY_MAX_S))

    # -- per record ------------------------------------------------------------------------------

    def malformed(self, raw: RawRecord, bad: Malformed) -> None:
        self.counters.malformed(raw.topic)
        log.warning("skipped a malformed record: %s", bad)

    def decoder(self, raw: RawRecord) -> Any:
        found = self.sources.get(raw.topic)
        if found is None:
            raise Malformed("not a topic this process reads", raw.topic, raw.partition, raw.offset)
        cluster, decode = found
        return decode(cluster, raw)

    def meta_of(self, event: Any) -> Any:
        return self.wiring.meta.get(event.connect_cluster, event.connector)

    def failed(self, raw: RawRecord, exc: Exception) -> None:
        # One bad event must not stop the stream: count it, log it, go on.
        self.counters.malformed(self.events_name)
        log.error("could not decide on %s; skipped", raw.coordinates, exc_info=exc)

    # -- per frame -------------------------------------------------------------------------------

    async def decide_frame(self, key: str, value: bytes) -> None:
        """One internal record: a batch of one connector's raw records, in order (or a nudge)."""
        records: list[RawRecord] | None = None
        try:
            news = decode_nudge(value)  # the first byte tells
            if news is not None:
                await self.apply_news(key, news)
                return
            summary = None if self.compiled is None else frame_summary(value)
            if summary is None:  # (a frame it cannot read: decode_frame says why)
                records = decode_frame(value)
                summary = len(records), _connector_changed(records)
        except Malformed as bad:
            self.counters.malformed(self.events_name)
            log.warning("skipped a malformed frame for %s: %s", key, bad)
            return
        count, changed_topic = summary
        await self._refresh_on_connector_change(changed_topic)
        if await self._out_of_scope(key, count):
            return
        now = self.wiring.clock()
        if self.compiled is not None and await self._decide_compiled(
            self.compiled, key, value, now
        ):
            return
        if records is None:
            records = decode_frame(value)
        state = self.cache.get(key)
        try:
            applied, decisions = decide_batch(
                state,
                records,
                self.decoder,
                self.wiring.rules,
                self.meta_of,
                lambda _event: now,
                on_match=self.counters.match,
                on_event=lambda event: self.counters.event(event, now),
                on_malformed=self.malformed,
                on_error=self.failed,
            )
            if state.deferred:  # events waiting for this connector's metadata (engine.later)
                decisions += self.deferred(key, state, now)
                applied += 1
            if decisions:
                await self.decide_all(state, decisions)
        except BaseException:  # the state changed in place but was not put: never reuse it
            self.cache.forget(key)
            raise
        if applied:
            self.cache.put(key, state)  # once per frame, not per event

    async def _decide_compiled(
        self, owner: CompiledOwner, key: str, value: bytes, now: int
    ) -> bool:
        """The frame decided by the compiled engine, as `decide_frame` decides it with the
        Python one; False when it is the Python engine's (nothing was changed): a state or a
        record the compiled engine cannot continue exactly, or deferred events whose metadata
        is known now (redecided with the frame's firings, in one audit write: Python's)."""
        state = self.cache.get_compiled(key)
        if state is None:
            return False
        cluster, connector = split_owner_key(key)
        meta = self.wiring.meta.peek(cluster, connector)
        if meta is not None and state.deferred_count:
            return False
        outcome = owner.decide_frame(state, value, meta, now)
        if outcome is None:
            return False
        try:
            if meta is None and outcome.applied:
                self.wiring.meta.get(cluster, connector)  # a miss asks for it, as `meta_of` does
            self.counters.frame(outcome, now)
            waiting = state.deferred_count
            if waiting:  # the metadata is not known: `deferred` would only wait for it
                self._wait_for_meta(key, cluster, connector, waiting)
            if outcome.decisions:
                decided = compiled_decided(outcome, cluster, connector)
                await write_decided(self.wiring, self.audit_retry_delays(), decided)
        except BaseException:  # the state changed in place but was not put: never reuse it
            self.cache.forget(key)
            raise
        if outcome.applied or waiting:
            self.cache.put(key, state)
        return True

    async def _refresh_on_connector_change(self, topic: str | None) -> None:
        """A connector changed (its status record came from `topic`): re-read the metadata of
        the topic's cluster (rate-limited)."""
        if topic is not None:
            found = self.sources.get(topic)
            if found is not None:
                await self.wiring.meta.refresh(found[0])

    async def _out_of_scope(self, key: str, count: int) -> bool:
        """offsetd.scope: a connector this deployment does not own is dropped here, before the
        rules (no decision, no audit record, no budget spent), and counted. Labels not known
        yet (None) are not "out": decided, and the scope guard does not act without them."""
        cluster, connector = split_owner_key(key)
        wiring = self.wiring
        scope = scope_of(wiring.settings.remediation, cluster, wiring.connect.get(cluster))
        if scope.everything:
            return False
        owned = scope.check(connector, None)  # the names, when they decide alone
        if owned.in_scope is None:  # else its labels do: known, or read now
            owned = scope.check_meta(connector, await wiring.meta.lookup(cluster, connector))
        if owned.in_scope is False:
            wiring.metrics.out_of_scope.labels(cluster).inc(count)
            return True
        return False

    def deferred(self, key: str, state: ConnectorState, now: int) -> list[Decision]:
        """Decide the connector's deferred events if its metadata is known by now; else read
        it (`MetadataReader`). The wait is never silent: a gauge, and a log line per try."""
        cluster, connector = state.connect_cluster, state.connector
        wiring = self.wiring
        # offsetd.scope: metadata known by now may show that another deployment owns it
        scope = scope_of(wiring.settings.remediation, cluster, wiring.connect.get(cluster))
        if scope.check_meta(connector, wiring.meta.peek(cluster, connector)).in_scope is False:
            wiring.metrics.out_of_scope.labels(cluster).inc(len(state.deferred))
            state.deferred = []
        made, expired = redecide_deferred(
            state, wiring.rules, wiring.meta.peek(cluster, connector), now, self.counters.match
        )
        if expired:
            self.later.waiting_expired.labels(cluster).inc(expired)
            log.warning(
                "%d event(s) of %s waited for its metadata past their rules' windows: not decided",
                expired,
                key,
            )
        self._wait_for_meta(key, cluster, connector, len(state.deferred))
        return made

    def _wait_for_meta(self, key: str, cluster: str, connector: str, waiting: int) -> None:
        """`waiting` events wait for the connector's metadata: the gauge, and a read of it."""
        self.later.waiting_events.labels(cluster, connector).set(waiting)
        if waiting:
            self.metadata.await_meta(key, cluster, connector)

    # -- nudges ----------------------------------------------------------------------------------

    async def apply_news(self, key: str, news: dict[str, object]) -> None:
        """A nudge: an executor's outcome (`settle`), metadata now known (deferred events), or
        a progress event from the lag collector (decided like a frame of one event)."""
        if news["type"] == "progress":
            await self.decide_progress(key, news)
            return
        state = self.cache.get(key)
        if not state.connector:
            return  # nothing was ever decided for it: nothing to give back or to decide
        now = self.wiring.clock()
        made: list[Decision] | None
        try:
            if news["type"] == "outcome":
                made = self._settle(state, cast(OutcomeNews, news["outcome"]), now)
            elif news["type"] == "metadata":
                made = self.deferred(key, state, now) if state.deferred else None
            else:
                log.warning("skipped a nudge of unknown type for %s: %s", key, news["type"])
                return
            if made:
                await self.decide_all(state, made)
        except BaseException:  # the state changed in place but was not put: never reuse it
            self.cache.forget(key)
            raise
        if made is None:
            return  # the state is as it was
        self.cache.put(key, state)

    async def decide_progress(self, key: str, news: dict[str, object]) -> None:
        """A progress event (`offsetd.lag.progress`): decided by the connector's owner with its
        other events and shared state; malformed news is counted and skipped like a record."""
        try:
            event = ProgressEvent.model_validate(news["event"])
        except (ValidationError, KeyError) as exc:
            self.counters.malformed(self.events_name)
            log.warning("skipped a malformed progress nudge for %s: %s", key, exc)
            return
        if await self._out_of_scope(key, 1):
            return
        now = self.wiring.clock()
        state = self.cache.get(key)
        try:
            self.counters.event(event, now)
            decisions = decide_firings(
                state,
                event,
                self.wiring.rules,
                self.meta_of(event),
                now,
                self.counters.match,
            )
            if state.deferred:  # waiting for the connector's metadata (engine.later)
                decisions += self.deferred(key, state, now)
            if decisions:
                await self.decide_all(state, decisions)
        except BaseException:
            self.cache.forget(key)
            raise
        self.cache.put(key, state)

    def _settle(self, state: ConnectorState, told: OutcomeNews, now: int) -> list[Decision] | None:
        """An outcome: what it gives back and decides again; None if nothing changed."""
        held = len(state.held)
        made = settle(state, told, self.wiring.rules, now)
        released = did_not_run(told["outcome"], told["would_be"])
        if not released and held == len(state.held):
            return None  # it ran, and held nothing back: the state is as it was
        if released:
            self.later.releases.labels(told["rule"], told["outcome"]).inc()
            log.info(
                "decision %s (%s) did not run (%s): its limits are given back; "
                "%d decision(s) it held back decided again",
                told["decision"],
                told["rule"],
                told["outcome"],
                len(made),
            )
        return made

    async def report_outcome(self, decision: Decision, outcome: str, extra: dict[str, Any]) -> None:
        """The executor's outcome of a planned decision, to the connector's owner (this very
        worker: the executor runs where the decision was made) through the events topic."""
        if outcome in PENDING_OUTCOMES:
            return
        would_be = str(extra["would_be"]) if extra.get("would_be") else None
        news: dict[str, object] = {
            "type": "outcome",
            "outcome": outcome_news(decision, outcome, would_be),
        }
        await self.nudge(owner_key(decision.connect_cluster, decision.connector), news)

    def rescan_waiting(self, states: Any) -> None:
        """States with deferred events and no read of their metadata under way (after a
        restart, or a read that gave up): read it again."""
        for key, text in list(states.items()):
            if not text or '"deferred":[]' in text or self.metadata.reading(key):
                continue
            state = self.cache.get(key)
            if state.deferred:
                self.later.waiting_events.labels(state.connect_cluster, state.connector).set(
                    len(state.deferred)
                )
                self.metadata.await_meta(key, state.connect_cluster, state.connector)

    def rewrite_tallies(self, states: Any) -> int:
        """Write the tallies of each state once per process (its first look at the state): a
        crash may have put a state whose tally writes (`write_soon`) never arrived. Returns
        how many were written."""
        window = self.wiring.settings.daemon.suppressed_window
        written = 0
        for key, text in list(states.items()):
            if key in self._tallies_rewritten:
                continue
            self._tallies_rewritten.add(key)
            if not text or '"suppressed":{}' in text:
                continue
            state = self.cache.get(key)
            updates = [tally_record(state, t, window) for t in state.suppressed.values()]
            self.wiring.audit.write_soon(updates)
            written += len(updates)
        return written

    # -- the audit -------------------------------------------------------------------------------

    async def decide_all(self, state: ConnectorState, decisions: Sequence[Firing]) -> None:
        """The Python engine's firings of a frame or a nudge, folded into `state` and written
        (`offsetd.app.decided.write_decided`, the compiled engine's way too): the planned
        decisions and the tallies their suppressed ones changed, with one wait for all their
        acknowledgements. The state must be put back afterwards (the tallies)."""
        window = self.wiring.settings.daemon.suppressed_window
        decided = python_decided(state, decisions, window)
        await write_decided(self.wiring, self.audit_retry_delays(), decided)


def _connector_changed(records: list[RawRecord]) -> str | None:
    """The topic of the frame's first connector status record (a connector changed), if any."""
    for raw in records:
        if raw.key is not None and raw.key.startswith(_CONNECTOR_STATUS):
            return raw.topic
    return None
