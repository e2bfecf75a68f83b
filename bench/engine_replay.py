"""The owner's work on bench_daemon's copy topic, replayed in memory: a digest and a timing.

Issue 35's tool to change the engine safely: run it with the code before and after a change
(`PYTHONPATH=<tree>/daemon:<tree> python <tree>/bench/engine_replay.py ...`) on the same records
file, and compare.

- `digest`: every event's JSON, every decision of `decide` (full `Decision`s) and every firing
  of `decide_firings` (the daemon's light path: id, rule, outcome, reason, detail, key, event time,
  record), and every final state's JSON, hashed. Equal digests: the same decisions and states.
  Two more lines hash what the decoders make as Python holds it (`held`: each model's or
  dataclass's type, a model's `model_fields_set`, extra and private parts, each field in order
  with the type of its value, nested alike), so a change in how events and records are made (not
  only what they say) shows: `events`, every event decoded from the records; `frames`, every
  record `decode_frame` returns from the frames `time` replays, and the event decoded from it.
  A last digest replays the frames as `time` does and hashes the bytes the daemon writes: every
  audit record as `AuditLog.write_many`/`write_soon` encode it (the planned decisions and the
  tallies of each frame, as `app.decider` hands them over) and each frame's state JSON (what
  `StateCache.put` stores). Equal: the same audit records and changelog values, byte for byte.
- `time`: the agent's work per record as (f) does it, without Kafka: the records framed as the
  ingest frames them (batches of 5,000), then per frame `decode_frame`, `StateCache`,
  `decide_batch` (light), `fold_suppressed`, `tally_record`, the audit records' bytes as the
  audit encodes them (`audit_json`) and the state's JSON. Process CPU per record, `--repeat`
  times in one process.

The records are read once from the copy topic (assign only, nothing committed) into
`--records-file` and reused from there, so both trees see the same records in the same order.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_daemon import (
    CLUSTER,
    TOPIC,
    Pipeline,
    is_status,
    read_topic,
    write_rules,
)
from pydantic import BaseModel

from offsetd import audit
from offsetd.engine import ConnectorState
from offsetd.engine.batch import decide_batch
from offsetd.engine.cache import StateCache
from offsetd.engine.compiled import CompiledOwner
from offsetd.engine.decide import decide, decide_firings
from offsetd.engine.decision import audit_json
from offsetd.engine.tally import DEFAULT_WINDOW_MS, fold_suppressed, tally_record
from offsetd.events.decode import Malformed, RawRecord, raw_record
from offsetd.events.dlq import decode_dlq
from offsetd.events.frames import decode_frame, encode_frame, plan_frames, route_status_or_dlq
from offsetd.events.models import owner_key
from offsetd.events.status import decode_status
from offsetd.rules.loading import load_rules


def records(path: Path, bootstrap: str | None, limit: int) -> list[RawRecord]:
    if not path.exists():
        if bootstrap is None:
            sys.exit(f"{path} does not exist: give --bootstrap to read the copy topic once")
        read = [
            raw_record(m, consumed=True)
            for m in read_topic({"bootstrap.servers": bootstrap}, TOPIC, 10**9)
        ]
        path.write_bytes(pickle.dumps(read))
    found: list[RawRecord] = pickle.loads(path.read_bytes())  # noqa: S301 - our own file
    return found[:limit]


def decoder(raw: RawRecord) -> Any:
    return decode_status(CLUSTER, raw) if is_status(raw) else decode_dlq(CLUSTER, raw)


def held(value: Any) -> Any:
    """A value as Python holds it: types, fields in order, fields sets (`digest`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (type(value).__qualname__, [(f.name, held(getattr(value, f.name))) for f in fields])
    if isinstance(value, BaseModel):
        return (
            type(value).__qualname__,
            sorted(value.model_fields_set),
            value.__pydantic_extra__,
            value.__pydantic_private__,
            [(name, held(item)) for name, item in value.__dict__.items()],
        )
    if isinstance(value, dict):
        return ("dict", [(held(key), held(item)) for key, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__qualname__, [held(item) for item in value])
    return (type(value).__qualname__, value)


def digest(pipe: Pipeline, recs: list[RawRecord]) -> None:
    h = hashlib.sha256()
    count = 0
    for raw in recs:
        try:
            event = decoder(raw)
        except Malformed as bad:
            h.update(str(bad).encode())
            continue
        count += 1
        h.update(repr(held(event)).encode())
    print(f"events: {count:,} events, digest {h.hexdigest()}")
    h, count = hashlib.sha256(), 0
    for _, value in frames_of(recs):
        for raw in decode_frame(value):
            count += 1
            h.update(repr(held(raw)).encode())
            try:
                h.update(repr(held(decoder(raw))).encode())
            except Malformed as bad:
                h.update(str(bad).encode())
    print(f"frames: {count:,} records, digest {h.hexdigest()}")
    for light in (False, True):
        h = hashlib.sha256()
        states: dict[str, ConnectorState] = {}
        count = 0
        for raw in recs:
            try:
                event = decoder(raw)
            except Malformed as bad:
                h.update(str(bad).encode())
                continue
            h.update(event.model_dump_json().encode())
            state = states.setdefault(
                owner_key(event.connect_cluster, event.connector), ConnectorState()
            )
            meta, now = pipe.metas.get(event.connector), event.source.timestamp_ms
            if light:
                for f in decide_firings(state, event, pipe.rules, meta, now):
                    count += 1
                    seen = (f.id, f.rule, f.outcome, f.reason, f.detail, f.key, f.event_time_ms)
                    h.update(repr((*seen, f.record_text)).encode())
            else:
                for d in decide(state, event, pipe.rules, meta, now)[1]:
                    count += 1
                    h.update(d.model_dump_json().encode())
        for key in sorted(states):
            h.update(states[key].to_json().encode())
        print(f"{'light' if light else 'full'}: {count:,} decisions, digest {h.hexdigest()}")


class _Producer:
    """Stands in for confluent_kafka's Producer under `AuditLog`: keeps what it was given."""

    def __init__(self, _conf: dict[str, str]) -> None:
        self.produced: list[tuple[bytes, bytes]] = []

    def produce(self, _topic: str, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.produced.append((key, value))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


def audit_digest(pipe: Pipeline, recs: list[RawRecord], owner: CompiledOwner | None = None) -> None:
    """The bytes the daemon writes, replayed as `timing` does: audit records and states. With
    `owner`, the compiled owner decides every frame it can (the Python engine the others):
    equal digests, the same audit records and states, byte for byte."""
    audit.Producer = _Producer  # type: ignore[attr-defined,assignment]  # nothing leaves the process
    log = audit.AuditLog({})
    producer: _Producer = log._producer  # type: ignore[assignment]
    h = hashlib.sha256()
    store: dict[str, Any] = {}
    cache = StateCache(store)
    frames = frames_of(recs)
    written = compiled = 0

    async def replay() -> None:
        nonlocal written, compiled
        for key, value in frames:
            done = None if owner is None else compiled_frame(owner, pipe, cache, key, value)
            if done is not None:
                compiled += 1
                applied, records, updates, state = done
                if updates and not records:
                    log.write_soon_encoded(updates)
                elif records:
                    await log.write_many_encoded(records, updates)
            else:
                state = cache.get(key)
                applied, firings = decide_batch(
                    state,
                    decode_frame(value),
                    decoder,
                    pipe.rules,
                    lambda e: pipe.metas.get(e.connector),
                    lambda e: e.source.timestamp_ms,
                )
                if firings:  # as app.decider's decide_all
                    planned, tallies = fold_suppressed(state, firings, DEFAULT_WINDOW_MS)
                    tally_dicts = [tally_record(state, t, DEFAULT_WINDOW_MS) for t in tallies]
                    if not planned:
                        log.write_soon(tally_dicts)
                    else:
                        dicts = [d.audit_record(pipe.rules) for d in planned]
                        await log.write_many(dicts, updates=tally_dicts)
            for topic_key, topic_value in producer.produced:
                h.update(b"%d:%b%d:%b" % (len(topic_key), topic_key, len(topic_value), topic_value))
            written += len(producer.produced)
            producer.produced.clear()
            if applied:
                cache.put(key, state)
                h.update(store[key].encode())

    asyncio.run(replay())
    print(f"audit: {written:,} records and the states, digest {h.hexdigest()}")
    if owner is not None:
        print(
            f"       (compiled: {compiled:,} of {len(frames):,} frames; "
            "the Python engine the others)"
        )


def compiled_owner(pipe: Pipeline) -> CompiledOwner:
    owner, why = CompiledOwner.create(pipe.rules, {TOPIC: (CLUSTER, "shape")}, DEFAULT_WINDOW_MS)
    if owner is None:
        sys.exit(why)
    return owner


def compiled_frame(
    owner: CompiledOwner, pipe: Pipeline, cache: StateCache, key: str, value: bytes
) -> tuple[int, list[tuple[str, bytes]], list[tuple[str, bytes]], Any] | None:
    """One frame as the compiled owner decides it: (applied, the planned decisions' and the
    tallies' audit records as (id, bytes), the compiled state), or None when the frame is the
    Python engine's."""
    state = cache.get_compiled(key)
    if state is None:
        return None
    meta = pipe.metas.get(key.partition("/")[2])
    outcome = owner.decide_frame(state, value, meta, None)  # now = each event's time
    if outcome is None:
        return None
    return outcome.applied, owner.audit_records(outcome), owner.tally_records(outcome), state


def compiled_timing(pipe: Pipeline, recs: list[RawRecord], repeat: int) -> None:
    """`timing` with the compiled owner: per frame `decide_frame` (decode, match, decide,
    fold), the planned decisions' and tallies' audit bytes as the audit encodes them, and the
    state's JSON (`StateCache.put`)."""
    owner = compiled_owner(pipe)
    frames = frames_of(recs)
    for _ in range(repeat):
        cache = StateCache({})
        written = python = 0
        began = time.process_time()
        for key, value in frames:
            state = cache.get_compiled(key)
            outcome = None
            if state is not None:
                meta = pipe.metas.get(key.partition("/")[2])
                outcome = owner.decide_frame(state, value, meta, None)
            if outcome is None:
                python += 1
                continue
            written += len(owner.audit_records(outcome)) + len(owner.tally_records(outcome))
            if outcome.applied:
                cache.put(key, state)
        spent = time.process_time() - began
        per = spent / len(recs) * 1e6
        print(
            f"{per:.1f} us CPU per record, compiled ({len(frames):,} frames, {python} left to "
            f"Python and not timed, {written:,} audit records)"
        )


def frames_of(recs: list[RawRecord]) -> list[tuple[str, bytes]]:
    """The records framed as the ingest frames them (batches of 5,000): (owner, frame)."""
    frames: list[tuple[str, bytes]] = []
    for start in range(0, len(recs), 5000):
        routed = ((route_status_or_dlq(CLUSTER, r), r) for r in recs[start : start + 5000])
        plan = plan_frames(routed, max_frame_bytes=1 << 20, max_record_bytes=8 << 20)
        for (owner, framed), encoded in zip(plan.frames, plan.encoded, strict=True):
            frames.append((owner, encode_frame(framed, encoded=encoded)))
    return frames


def timing(pipe: Pipeline, recs: list[RawRecord], repeat: int) -> None:
    frames = frames_of(recs)
    for _ in range(repeat):
        cache = StateCache({})
        written = 0
        began = time.process_time()
        for key, value in frames:
            state = cache.get(key)
            applied, firings = decide_batch(
                state,
                decode_frame(value),
                decoder,
                pipe.rules,
                lambda e: pipe.metas.get(e.connector),
                lambda e: e.source.timestamp_ms,
                on_match=pipe.count_match,
            )
            if firings:
                planned, tallies = fold_suppressed(state, firings, DEFAULT_WINDOW_MS)
                out = [audit_json(d.audit_record(pipe.rules)) for d in planned]
                out += [audit_json(tally_record(state, t, DEFAULT_WINDOW_MS)) for t in tallies]
                written += len(out)
            if applied:
                cache.put(key, state)
        spent = time.process_time() - began
        per = spent / len(recs) * 1e6
        print(f"{per:.1f} us CPU per record ({len(frames):,} frames, {written:,} audit records)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("digest", "time"))
    parser.add_argument(
        "--engine",
        choices=("python", "compiled"),
        default="python",
        help="compiled: the compiled owner (native/) decides the frames it can",
    )
    parser.add_argument(
        "--records-file",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench-daemon-copy.pickle",
    )
    parser.add_argument(
        "--bootstrap", help="west's bootstrap servers (only to write the records file)"
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    recs = records(args.records_file, args.bootstrap, args.records)
    with tempfile.TemporaryDirectory(prefix="engine-replay-rules-") as folder:
        write_rules(Path(folder))
        pipe = Pipeline(load_rules(Path(folder)))
    if args.mode == "digest" and args.engine == "compiled":
        audit_digest(pipe, recs, compiled_owner(pipe))
    elif args.mode == "digest":
        digest(pipe, recs)
        audit_digest(pipe, recs)
    elif args.engine == "compiled":
        compiled_timing(pipe, recs, args.repeat)
    else:
        timing(pipe, recs, args.repeat)


if __name__ == "__main__":
    main()
