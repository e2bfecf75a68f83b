"""The faust app: Connect's topics -> typed events -> one owner per connector -> rules -> decisions.

Wiring only (the only package that imports faust). The logic lives in the pure core: decoders in
`offsetd.events`, rules in `offsetd.rules`, the engine in `offsetd.engine`.

- The ingest (`offsetd.ingest`, a confluent-kafka consumer in a thread, not a faust agent: faust's
  driver alone moves ~8k records/s, bench/README.md) reads the status, offsets and DLQ topics of
  every Connect cluster whose internal topics live on this process's Kafka cluster in batches,
  routes each record to `<connect-cluster>/<connector>` and sends one frame of raw records per
  connector and batch to one internal topic with a fixed partition count, so one worker owns
  each connector. A record that names no connector is counted, logged with its coordinates and
  skipped.
- The agent over that topic (`decider.FrameDecider`, a faust agent for the Table) takes each
  frame, decodes its records (malformed ones counted, logged, skipped), runs the engine on the
  connector's state, writes every decision to the audit topic, awaited, and then the state, once
  per frame. The state is kept decoded in memory in front of the Table (`StateCache`): it is
  parsed only after a recovery or rebalance.
- Nudges (`events.frames`, same topic, same key) bring the owner what it learns later, so the
  state keeps one writer: the executor's outcome of each planned decision (one that did not
  run gives its limits back and lets the decision it inhibited be decided again,
  `engine.later.settle`), and "this connector's metadata is known now" after a one-connector
  read of Connect that events waiting for it asked for (`metadata.MetadataReader`).
- Unfinished sagas resume as early as it is safe (`recovery`).

The ingest commits its offsets only after the frames are acknowledged (acks=all); faust flushes
its producer (the Table's changelog) before it commits the offsets of the frames it consumed. So
after a crash every record is seen again at least once; the engine's per-source high-water marks
make counting idempotent and decision ids are deterministic, so the audit never holds a decision
twice.

Modules: `wiring` (what `offsetd run` hands in), `broker` (the faust app, its credentials,
topic, table and worker), `counters`, `decider`, `metadata`, `recovery`, `build` (`build_app`),
`health` and `probes` (`/healthz`, `/readyz`), `startup_health`, `group_access` and
`internal_topics` (before the worker starts: the pages while it waits, whether it may join its
groups, and every topic it uses created and seen by every broker before faust subscribes).
"""

from offsetd.app.broker import faust_credentials, run_worker
from offsetd.app.build import build_app
from offsetd.app.internal_topics import prepare_internal_topics
from offsetd.app.wiring import Wiring

__all__ = ["Wiring", "build_app", "faust_credentials", "prepare_internal_topics", "run_worker"]
