"""Checkpoint records decoded from MM2's binary format, and the failover math."""

from __future__ import annotations

import struct

import pytest

from offsetd.lag.checkpoints import (
    Checkpoint,
    CheckpointError,
    checkpoint_age_seconds,
    decode_checkpoint,
    reconsume_lower_bound,
    upstream_topic,
)


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _key(group: str, topic: str, partition: int) -> bytes:
    return _string(group) + _string(topic) + struct.pack(">i", partition)


def _value(upstream: int, downstream: int, metadata: str = "", version: int = 0) -> bytes:
    return struct.pack(">hqq", version, upstream, downstream) + _string(metadata)


def test_decodes_what_mm2_writes() -> None:
    c = decode_checkpoint(_key("billing", "east.orders", 3), _value(1200, 1190, "m"), 42)
    assert c == Checkpoint("billing", "east.orders", 3, 1200, 1190, 42)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (None, _value(1, 1)),
        (_key("g", "t", 0), None),
        (_key("g", "t", 0)[:-1], _value(1, 1)),
        (_key("g", "t", 0), _value(1, 1)[:10]),
        (_key("g", "t", 0), _value(1, 1, version=1)),
        (b"\x00\x09ab", _value(1, 1)),
    ],
)
def test_rejects_what_is_not_a_checkpoint(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(CheckpointError):
        decode_checkpoint(key, value, 0)


def test_upstream_topic_strips_the_source_prefix_only() -> None:
    assert upstream_topic("east.orders", "east") == "orders"
    assert upstream_topic("east.orders.v2", "east") == "orders.v2"
    assert upstream_topic("orders", "east") == "orders"  # identity policy
    assert upstream_topic("east_orders", "east", "_") == "orders"


def test_reconsume_lower_bound_and_age_only_while_the_group_is_ahead() -> None:
    c = Checkpoint("g", "east.t", 0, upstream_offset=100, downstream_offset=98, timestamp_ms=10_000)
    assert reconsume_lower_bound(130, c) == 30
    assert reconsume_lower_bound(100, c) == 0
    assert reconsume_lower_bound(90, c) == 0  # group reset behind the checkpoint
    assert checkpoint_age_seconds(130, c, now_ms=70_000) == 60.0
    # An idle group (committed == checkpoint's upstream) must not look stale however old it is.
    assert checkpoint_age_seconds(100, c, now_ms=10_000_000) is None
    assert checkpoint_age_seconds(None, c, now_ms=70_000) is None
