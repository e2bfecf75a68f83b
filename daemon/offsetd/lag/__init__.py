"""MirrorMaker 2 replication lag, in records and seconds, with a Burrow-style status.

MirrorSourceConnector keeps no consumer group: its progress N (the last replicated source
offset) exists only in Connect's offsets topic. This package reads it, compares it with the source
log end, and renders Prometheus metrics in the background so a scrape is a byte copy.

Pure parts (no I/O): `arithmetic`, `status`, `checkpoints`, `readiness` (could a consumer
group fail over now), `exposition`, `snapshot`.
I/O parts: `offsets_tail` (Connect's offsets topic), `kafka_io` (ListOffsets, record
timestamps, heartbeats, checkpoints, group offsets), `connect_state` (Connect REST),
`window_store` (the persisted sample window), `collector` (one cycle), `exporter` (the
background thread and `render()`), `server` (a tiny `/metrics` HTTP server), `ownership` (which
`offsetd run` worker collects).
"""

from offsetd.lag.exporter import LagExporter

__all__ = ["LagExporter"]
