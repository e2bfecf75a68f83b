"""connect-offsets records -> SourceOffsetEvent.

Key `["<connector>", {partition}]`, value the offset object or null (a tombstone), as
`OffsetStorageWriter` writes them through the internal JsonConverter (reference/connect-offsets.md
§2.1). Partition and offset maps hold only strings, numbers, booleans and nulls
(`OffsetUtils.validateFormat`); anything else is Malformed.
"""

from __future__ import annotations

from offsetd.events.decode import (
    RawRecord,
    build,
    excerpt,
    json_type,
    json_value,
    malformed,
    source_of,
)
from offsetd.events.models import JsonScalar, SourceOffsetEvent

__all__ = ["decode_offsets"]

_SCALARS = (str, int, float, bool, type(None))


def decode_offsets(connect_cluster: str, raw: RawRecord) -> SourceOffsetEvent:
    """A source connector's offset for one of its partitions (`offset=None`: removed)."""
    if raw.key is None:
        raise malformed(raw, "offsets record has no key")
    key = json_value(raw, raw.key, "offsets key")
    if not (isinstance(key, list) and len(key) == 2 and isinstance(key[0], str) and key[0]):
        raise malformed(raw, 'offsets key is not a JSON array ["<connector>", {partition}]')
    partition = _flat(raw, key[1], "offsets key partition")
    offset = None
    if raw.value is not None:
        offset = _flat(raw, json_value(raw, raw.value, "offsets value"), "offsets value")
    data: dict[str, object] = {
        "connect_cluster": connect_cluster,
        "connector": key[0],
        "source": source_of(raw),
        "partition": partition,
        "offset": offset,
    }
    return build(raw, SourceOffsetEvent, data)


def _flat(raw: RawRecord, value: object, what: str) -> dict[str, JsonScalar]:
    if not isinstance(value, dict):
        raise malformed(raw, f"{what} is {json_type(value)}, not an object")
    for field, item in value.items():
        if type(item) not in _SCALARS:
            kind = json_type(item)
            raise malformed(raw, f"{what} field {excerpt(field)} is {kind}, not a scalar")
    return value
