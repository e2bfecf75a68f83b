"""What the JVM does to a Connect offsets key, redone in Python, byte for byte (no I/O).

A Connect worker finds a task's offset by the *exact bytes* of its key, and its producer picks the
topic partition from those bytes. Writing that topic from Python therefore needs four Java
behaviours reproduced exactly:

- `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, in int32;
- `java.util.HashMap` iteration order, which decides the key order of maps Connect serializes
  (hash spread `h ^ (h >>> 16)`, bucket `hash & (capacity - 1)`, capacity 16 doubling above a
  0.75 load, insertion order within a bucket);
- Jackson's compact JSON, as written by Connect's internal `JsonConverter` (no spaces; `\\uXXXX`
  escapes in upper-case hex; characters outside the BMP written as two escaped surrogates;
  everything else as raw UTF-8);
- Kafka's `Utils.murmur2` (seed 0x9747b28c) and `toPositive(h) % partitions`, the partition the
  Java producer's default partitioner picks for a keyed record.

The unit tests hold these against outputs of the real JVM classes (Kafka 4.2, JDK 17).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence

from offsetd.offsets.model import JsonScalar

__all__ = [
    "JAVA_LONG_MAX",
    "JAVA_LONG_MIN",
    "JavaEncodingError",
    "encode_offset_key",
    "encode_offset_value",
    "hashmap_order",
    "hashmap_spread",
    "jackson_object",
    "jackson_scalar",
    "jackson_string",
    "java_partition",
    "murmur2",
    "string_hash",
    "to_positive",
]

_M32 = 0xFFFFFFFF
_MURMUR_SEED = 0x9747B28C
_MURMUR_M = 0x5BD1E995

_DEFAULT_CAPACITY = 16
_LOAD_FACTOR = 0.75
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64

JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1


class JavaEncodingError(ValueError):
    """A value cannot be written the way the JVM would write it (the caller names the context)."""


def _int32(value: int) -> int:
    value &= _M32
    return value - (1 << 32) if value & 0x80000000 else value


# -- String.hashCode and HashMap order ----------------------------------------------------------


def string_hash(text: str) -> int:
    """Java's `String.hashCode()` (a signed int32), over UTF-16 code units like the JVM."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & _M32
    return _int32(h)


def hashmap_spread(key: str) -> int:
    """`HashMap.hash(key)`: the hash code with its high half folded in (unsigned 32-bit)."""
    h = string_hash(key) & _M32
    return h ^ (h >> 16)


def hashmap_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a `new HashMap<>()` after `put(key, ...)` for `keys` in order.

    Replays `HashMap.putVal`: the table is allocated at 16 buckets, doubles when the size passes
    0.75 of the capacity, and also doubles (instead of converting a bucket to a tree) when one
    bucket reaches 9 entries while the table has fewer than 64 buckets. Each bucket keeps its
    entries in insertion order, and a resize splits a bucket without reordering, so iteration is
    "by bucket index at the final capacity, then by insertion order". Re-putting a key changes
    nothing. Tree buckets (9+ colliding keys in a table of 64+) iterate in an order this does not
    model, so they raise `JavaEncodingError`; no real partition map comes near that.
    """
    capacity = _DEFAULT_CAPACITY
    threshold = int(capacity * _LOAD_FACTOR)
    buckets: dict[int, list[tuple[int, str]]] = {}
    inserted: list[tuple[int, str]] = []
    for key in keys:
        spread = hashmap_spread(key)
        bucket = buckets.setdefault(spread & (capacity - 1), [])
        if any(existing == key for _, existing in bucket):
            continue
        bucket.append((spread, key))
        inserted.append((spread, key))
        if len(bucket) > _TREEIFY_THRESHOLD:  # putVal: binCount >= TREEIFY_THRESHOLD - 1
            if capacity >= _MIN_TREEIFY_CAPACITY:
                raise JavaEncodingError(
                    f"{len(bucket)} keys share one HashMap bucket of {capacity}: Java would "
                    "turn it into a tree, whose iteration order is not reproduced here"
                )
            capacity, threshold = capacity * 2, threshold * 2
            buckets = _rehash(inserted, capacity)
        if len(inserted) > threshold:
            capacity, threshold = capacity * 2, threshold * 2
            buckets = _rehash(inserted, capacity)
    return [key for index in sorted(buckets) for _, key in buckets[index]]


def _rehash(inserted: Sequence[tuple[int, str]], capacity: int) -> dict[int, list[tuple[int, str]]]:
    buckets: dict[int, list[tuple[int, str]]] = {}
    for spread, key in inserted:
        buckets.setdefault(spread & (capacity - 1), []).append((spread, key))
    return buckets


# -- Jackson's compact JSON ---------------------------------------------------------------------

_STANDARD_ESCAPES = {
    0x22: '\\"',
    0x5C: "\\\\",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0C: "\\f",
    0x0D: "\\r",
}


def _escape_unit(unit: int) -> str:
    return _STANDARD_ESCAPES.get(unit) or f"\\u{unit:04X}"


def jackson_string(text: str) -> str:
    """A JSON string literal as Jackson's UTF-8 generator writes it (before UTF-8 encoding)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if code < 0x20 or code in (0x22, 0x5C):
            out.append(_escape_unit(code))
        elif code > 0xFFFF:  # Jackson escapes both halves of the UTF-16 surrogate pair
            code -= 0x10000
            out.append(_escape_unit(0xD800 + (code >> 10)) + _escape_unit(0xDC00 + (code & 0x3FF)))
        elif 0xD800 <= code <= 0xDFFF:  # a lone surrogate (Java strings may hold one)
            out.append(_escape_unit(code))
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def jackson_scalar(value: JsonScalar, *, floats: bool) -> str:
    """One primitive as Jackson writes it. Floats only when `floats`: Java's `Double.toString`
    is not reproduced, so a float can never be part of bytes that must match exactly."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
            raise JavaEncodingError(f"{value} does not fit a Java long")
        return str(value)
    if isinstance(value, float):
        if not floats:
            raise JavaEncodingError(
                f"the floating-point value {value!r} cannot be encoded byte-exactly as Java does"
            )
        if not math.isfinite(value):
            raise JavaEncodingError(f"{value!r} is not valid JSON")
        return repr(value)
    if isinstance(value, str):
        return jackson_string(value)
    raise JavaEncodingError(f"{value!r} is not a JSON primitive (string, number, boolean, null)")


def jackson_object(ordered: Mapping[str, JsonScalar], *, floats: bool) -> str:
    """A flat JSON object in the mapping's own iteration order, compact."""
    items = (
        f"{jackson_string(key)}:{jackson_scalar(value, floats=floats)}"
        for key, value in ordered.items()
    )
    return "{" + ",".join(items) + "}"


def encode_offset_key(connector: str, ordered_partition: Mapping[str, JsonScalar]) -> bytes:
    """The key Connect writes for `[connector, partition]`, with the map in the given order."""
    body = f"[{jackson_string(connector)},{jackson_object(ordered_partition, floats=False)}]"
    return body.encode("utf-8", "surrogatepass")


def encode_offset_value(offset: Mapping[str, JsonScalar] | None) -> bytes | None:
    """The value for an offset map (compact JSON), or None for a tombstone.

    Values are parsed by the worker, never compared as bytes, so floats are allowed here.
    """
    if offset is None:
        return None
    return jackson_object(offset, floats=True).encode("utf-8", "surrogatepass")


# -- murmur2 and the default partitioner ---------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2(byte[])`: a signed int32, exactly as the Java client computes it."""
    length = len(data)
    h = (_MURMUR_SEED ^ length) & _M32
    whole = length & ~3
    for (block,) in struct.iter_unpack("<I", data[:whole]):
        k = (block * _MURMUR_M) & _M32
        k ^= k >> 24
        k = (k * _MURMUR_M) & _M32
        h = ((h * _MURMUR_M) & _M32) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _MURMUR_M) & _M32
    h ^= h >> 13
    h = (h * _MURMUR_M) & _M32
    h ^= h >> 15
    return _int32(h)


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: `number & 0x7fffffff` (not `abs`)."""
    return number & 0x7FFFFFFF


def java_partition(key: bytes, partitions: int) -> int:
    """The partition the Java producer's default partitioner picks for a record with this key."""
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    return to_positive(murmur2(key)) % partitions
