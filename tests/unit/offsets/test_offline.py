"""Offline mode, pure parts: Java-exact keys, HashMap order, murmur2, conflicts, planning, gate.

The reference for every Java behaviour is Java itself. The constants below were produced by the
real classes (Kafka 4.2.0 jars, OpenJDK 17) with `JAVA_GOLDEN` (kept here, run again by
`test_randomised_cases_match_the_jvm` whenever java and the stack's jars are on this machine),
plus Kafka's own `UtilsTest.testMurmur2` vectors and the bytes the real stack's Connect wrote.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from offsetd.devstack.jars import cache_root
from offsetd.offsets.model import (
    MIRROR_CHECKPOINT_CLASS,
    MIRROR_HEARTBEAT_CLASS,
    MIRROR_SOURCE_CLASS,
    OffsetEntry,
    PartitionMap,
    mirror_partition,
    partition_key,
    sink_partition,
)
from offsetd.offsets.offline import (
    LIVE_TASK_STATES,
    OfflineRefused,
    check_offline_allowed,
    javahash,
)
from offsetd.offsets.offline.gate import acheck_offline_allowed
from offsetd.offsets.offline.javahash import (
    encode_offset_key,
    encode_offset_value,
    hashmap_order,
    hashmap_spread,
    jackson_string,
    java_partition,
    murmur2,
    string_hash,
)
from offsetd.offsets.offline.plan import (
    FILE_STREAM_SOURCE_CLASS,
    SinkChange,
    builtin_layout,
    parse_key_template,
    plan_sink_writes,
    plan_source_writes,
)
from offsetd.offsets.offline.view import OfflineError, OffsetsView, RawRecord, build_view

# -- Java String.hashCode -----------------------------------------------------------------------

JAVA_HASH_CODES = {  # String.hashCode() printed by the JVM
    "cluster": 872092154,
    "partition": -1799810326,
    "topic": 110546223,
    "group": 98629247,
    "sourceClusterAlias": -1602540495,
    "targetClusterAlias": 940094631,
    "filename": -734768633,
    "": 0,
    "é": 233,
    "😀": 1772899,  # two UTF-16 units: 0xD83D * 31 + 0xDE00
    "Aa": 2112,
    "BB": 2112,
    "kafka_topic": -37997866,
    "kafka_partition": 164973841,
}


@pytest.mark.parametrize(("text", "expected"), JAVA_HASH_CODES.items())
def test_string_hash_matches_the_jvm(text: str, expected: int) -> None:
    assert string_hash(text) == expected


def test_string_hash_by_hand() -> None:
    assert string_hash("ab") == 97 * 31 + 98
    assert string_hash("topic") == (((116 * 31 + 111) * 31 + 112) * 31 + 105) * 31 + 99
    # "cluster" overflows int32: the sum taken mod 2^32, read as signed
    total = sum(ord(c) * 31 ** (6 - i) for i, c in enumerate("cluster")) % 2**32
    assert total == 872092154  # positive, below 2^31


def _closed_form_hash(text: str) -> int:
    units = [
        int.from_bytes(text.encode("utf-16-be", "surrogatepass")[i : i + 2], "big")
        for i in range(0, len(text.encode("utf-16-be", "surrogatepass")), 2)
    ]
    total = sum(u * pow(31, len(units) - 1 - i, 2**32) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text())
def test_string_hash_is_javas_closed_form(text: str) -> None:
    """String.hashCode's documented formula, s[0]*31^(n-1) + ... + s[n-1], in int32."""
    assert string_hash(text) == _closed_form_hash(text)


# -- HashMap iteration order --------------------------------------------------------------------

_AA_BB = ["".join(p) for p in itertools.product(["Aa", "BB"], repeat=4)]  # equal hash codes
_BUCKET_0 = ["k17", "k28", "k39", "k150", "k161", "k172", "k183", "k194", "k260"]

JAVA_HASHMAP_ORDERS: list[tuple[list[str], list[str]]] = [  # (put order, keySet() order)
    (["topic", "partition", "cluster"], ["cluster", "partition", "topic"]),
    (["group", "topic", "partition"], ["partition", "topic", "group"]),
    (["sourceClusterAlias", "targetClusterAlias"], ["sourceClusterAlias", "targetClusterAlias"]),
    (list("abcdefghijklmn"), list("abcdefghijklmn")),
    (["Aa", "BB"], ["Aa", "BB"]),
    (["BB", "Aa"], ["BB", "Aa"]),
    (_AA_BB[:10], _AA_BB[:10]),  # one bucket: two resizes instead of a tree, order kept
    (_AA_BB[:10][::-1], _AA_BB[:10][::-1]),
    (_BUCKET_0, _BUCKET_0),
    (_BUCKET_0[::-1], _BUCKET_0[::-1]),
    (
        [f"key{i}" for i in range(13)],  # 13 > 12: one resize to 32 buckets
        [
            "key1",
            "key2",
            "key0",
            "key5",
            "key6",
            "key3",
            "key4",
            "key9",
            "key7",
            "key8",
            "key11",
            "key10",
            "key12",
        ],
    ),
    (
        [f"field_{i}" for i in range(30)],  # two resizes, to 64 buckets
        [f"field_{i}" for i in (0, 20, 3, 21, 4, 22, 1, 23, 2, 24, 25, 26, 27, 28, 29, 7, 8)]
        + [f"field_{i}" for i in (5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)],
    ),
]


@pytest.mark.parametrize(("put_order", "expected"), JAVA_HASHMAP_ORDERS)
def test_hashmap_order_matches_the_jvm(put_order: list[str], expected: list[str]) -> None:
    assert hashmap_order(put_order) == expected


def test_mm2_layouts_are_the_orders_connect_wrote_on_the_real_stack() -> None:
    """Keys seen in the stack's connect-offsets (Kafka 4.2 worker running the MM2 set)."""
    stack_keys = {
        MIRROR_SOURCE_CLASS: b'["east->west.MirrorSourceConnector",'
        b'{"cluster":"east","partition":0,"topic":"heartbeats"}]',
        MIRROR_CHECKPOINT_CLASS: b'["east->west.MirrorCheckpointConnector",'
        b'{"partition":0,"topic":"east.heartbeats","group":"heartbeat-audit"}]',
        MIRROR_HEARTBEAT_CLASS: b'["west->east.MirrorHeartbeatConnector",'
        b'{"sourceClusterAlias":"west","targetClusterAlias":"east"}]',
    }
    stack_partitions = {  # the offsets-topic partitions (of 25) Connect's producer picked
        MIRROR_SOURCE_CLASS: 21,
        MIRROR_CHECKPOINT_CLASS: 18,
        MIRROR_HEARTBEAT_CLASS: 9,
    }
    for connector_class, raw in stack_keys.items():
        name, partition = json.loads(raw)
        layout = builtin_layout(connector_class)
        assert layout is not None
        assert list(layout.keys) == list(partition)
        shuffled = dict(reversed(list(partition.items())))
        assert encode_offset_key(name, layout.ordered(shuffled)) == raw
        assert java_partition(raw, 25) == stack_partitions[connector_class]


def test_ten_equal_hashes_resize_twice_and_an_eleventh_would_make_a_tree() -> None:
    assert hashmap_order(_AA_BB[:10]) == _AA_BB[:10]
    with pytest.raises(javahash.JavaEncodingError, match="tree"):
        hashmap_order(_AA_BB[:11])


@given(st.lists(st.text(max_size=12), max_size=40))
def test_hashmap_order_is_a_permutation_of_the_distinct_keys(keys: list[str]) -> None:
    try:
        order = hashmap_order(keys)
    except javahash.JavaEncodingError:
        assume(False)
        return
    assert sorted(order) == sorted(set(keys))


@given(st.lists(st.text(max_size=12), unique=True, max_size=12))
def test_small_maps_iterate_by_bucket_of_sixteen_then_insertion(keys: list[str]) -> None:
    """Up to 12 entries stay in 16 buckets (no resize while no bucket holds 9)."""
    buckets = [hashmap_spread(k) & 15 for k in keys]
    assume(max((buckets.count(b) for b in buckets), default=0) < 9)
    expected = [
        k
        for _, _, k in sorted(
            (b, i, k) for i, (b, k) in enumerate(zip(buckets, keys, strict=False))
        )
    ]
    assert hashmap_order(keys) == expected


@given(st.lists(st.text(max_size=12), unique=True, max_size=40), st.randoms())
def test_insertion_order_matters_only_within_a_bucket(keys: list[str], rnd: random.Random) -> None:
    try:
        order = hashmap_order(keys)
    except javahash.JavaEncodingError:
        assume(False)
        return
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    assume(len({hashmap_spread(k) & (capacity - 1) for k in keys}) == len(keys))
    shuffled = keys[:]
    rnd.shuffle(shuffled)
    assert hashmap_order(shuffled) == order


# -- Jackson's compact JSON ---------------------------------------------------------------------

JAVA_TRICKY_KEY = bytes.fromhex(  # JsonConverter output for the partition below, as given
    "5b2278222c7b2273223a227461625c746e6c5c6e63746c5c75303030315c75303031462071756f74655c2220"
    "62735c5c20736c6173682f20c3a9205c75443833445c754445303020e280a8207f222c2269223a2d352c2262"
    "223a747275652c226e223a6e756c6c2c22626967223a31323334353637383930313233347d5d"
)
JAVA_TRICKY_KEY_REST = bytes.fromhex(  # the same after REST's JsonConverter round trip
    "5b2278222c7b22626967223a31323334353637383930313233342c2262223a747275652c2273223a2274616"
    "25c746e6c5c6e63746c5c75303030315c75303031462071756f74655c222062735c5c20736c6173682f20c3"
    "a9205c75443833445c754445303020e280a8207f222c2269223a2d352c226e223a6e756c6c7d5d"
)
TRICKY_PARTITION: dict[str, Any] = {
    "s": 'tab\tnl\nctl\x01\x1f quote" bs\\ slash/ é 😀 \u2028 \x7f',
    "i": -5,
    "b": True,
    "n": None,
    "big": 12345678901234,
}


def test_key_encoding_is_byte_for_byte_jsonconverter() -> None:
    assert encode_offset_key("x", TRICKY_PARTITION) == JAVA_TRICKY_KEY
    assert encode_offset_key("file-src", {"filename": "/tmp/a.txt"}) == (
        b'["file-src",{"filename":"/tmp/a.txt"}]'
    )
    rest_order = {k: TRICKY_PARTITION[k] for k in hashmap_order(TRICKY_PARTITION)}
    assert encode_offset_key("x", rest_order) == JAVA_TRICKY_KEY_REST


def test_floats_are_refused_in_keys_but_allowed_in_values() -> None:
    with pytest.raises(javahash.JavaEncodingError, match="floating-point"):
        encode_offset_key("c", {"x": 1.5})
    with pytest.raises(javahash.JavaEncodingError, match="Java long"):
        encode_offset_key("c", {"x": 2**63})
    assert encode_offset_value({"position": 3, "ratio": 0.5}) == b'{"position":3,"ratio":0.5}'
    assert encode_offset_value(None) is None


@given(st.text(st.characters(exclude_categories=["Cs"])))
def test_jackson_strings_parse_back_and_escape_like_jackson(text: str) -> None:
    literal = jackson_string(text)
    assert json.loads(literal) == text
    assert not any(ord(c) < 0x20 for c in literal)
    assert not any(ord(c) > 0xFFFF for c in literal)  # astral chars as escaped surrogates
    for i in range(len(literal) - 5):
        if literal[i : i + 2] == "\\u" and (i == 0 or literal[i - 1] != "\\"):
            assert literal[i + 2 : i + 6] == literal[i + 2 : i + 6].upper()


# -- murmur2 ------------------------------------------------------------------------------------

KAFKA_UTILS_TEST_MURMUR2 = {  # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}
JAVA_MURMUR2 = {  # Utils.murmur2 run on the JVM: every tail length, and a real Connect key
    b"": 275646681,
    b"a": -1563381124,
    b"ab": 316155434,
    b"abcd": -1323649548,
    b"abcde": 461995741,
    b"abcdef": 1870650108,
    b"abcdefg": -346467175,
    bytes(range(256)): -1948347274,
    b"\xff" * 7: -71293549,
    b'["east->west.MirrorSourceConnector",{"cluster":"east","partition":0,"topic":"heartbeats"}]': (
        969118196
    ),
}


@pytest.mark.parametrize(
    ("data", "expected"), [*KAFKA_UTILS_TEST_MURMUR2.items(), *JAVA_MURMUR2.items()]
)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_java_partition_is_to_positive_modulo() -> None:
    assert java_partition(b"21", 25) == (-973932308 & 0x7FFFFFFF) % 25
    assert javahash.to_positive(-(2**31)) == 0  # not abs(): Integer.MIN_VALUE maps to 0
    # where Connect's own producer put the MM2 key on the real stack (25 partitions)
    stack_key = (
        b'["east->west.MirrorSourceConnector",'
        b'{"cluster":"east","partition":0,"topic":"heartbeats"}]'
    )
    assert java_partition(stack_key, 25) == 21
    with pytest.raises(ValueError, match="at least one partition"):
        java_partition(b"x", 0)


@given(st.binary(max_size=200), st.integers(1, 1000))
def test_partitions_are_in_range(data: bytes, partitions: int) -> None:
    h = murmur2(data)
    assert -(2**31) <= h < 2**31
    assert 0 <= java_partition(data, partitions) < partitions


# -- the JVM itself, when available -------------------------------------------------------------

JAVA_GOLDEN = r"""
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.*;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.connect.json.JsonConverter;

public class JavaGolden {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
    static byte[] unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++)
            b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return b;
    }
    @SuppressWarnings("unchecked")
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        JsonNode in = mapper.readTree(System.in);
        JsonConverter conv = new JsonConverter();
        conv.configure(Map.of("schemas.enable", "false"), true);  // Connect's internal one
        ObjectNode out = mapper.createObjectNode();
        ArrayNode hashes = out.putArray("hash_codes");
        for (JsonNode s : in.get("hash_strings")) hashes.add(s.asText().hashCode());
        ArrayNode murmurs = out.putArray("murmur2");
        for (JsonNode h : in.get("murmur_hex")) murmurs.add(Utils.murmur2(unhex(h.asText())));
        ArrayNode orders = out.putArray("hashmap_orders");
        for (JsonNode keys : in.get("hashmap_keys")) {
            HashMap<String, Object> m = new HashMap<>();
            for (JsonNode k : keys) m.put(k.asText(), null);
            ArrayNode o = orders.addArray();
            for (String k : m.keySet()) o.add(k);
        }
        ArrayNode keysOut = out.putArray("keys");
        for (JsonNode c : in.get("keys")) {
            Map<String, Object> p = mapper.convertValue(c.get("partition"), LinkedHashMap.class);
            byte[] asIs = conv.fromConnectData("t", null, Arrays.asList(c.get("name").asText(), p));
            Object back = conv.toConnectData("t", asIs).value();  // what REST's normalization does
            ObjectNode r = keysOut.addObject();
            r.put("as_is", hex(asIs));
            r.put("rest", hex(conv.fromConnectData("t", null, back)));
            r.put("partition_25", Utils.toPositive(Utils.murmur2(asIs)) % 25);
        }
        System.out.println(mapper.writeValueAsString(out));
    }
}
"""


def _jar_dir() -> Path | None:
    ready = sorted(cache_root().glob("kafka-*/.complete"))
    return ready[-1].parent if ready else None


def _run_java(tmp_path: Path, cases: dict[str, Any]) -> dict[str, Any]:
    java, jars = shutil.which("java"), _jar_dir()
    if java is None or jars is None:
        pytest.skip("needs java and the stack's Kafka jars (offsetd dev up fetches them)")
    source = tmp_path / "JavaGolden.java"
    source.write_text(JAVA_GOLDEN)
    done = subprocess.run(
        [java, "-cp", f"{jars}/*", str(source)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _random_cases(rng: random.Random) -> dict[str, Any]:
    alphabet = 'abcXYZ_-.09 é\t\n\x01"\\/😀\u2028'

    def word(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(n)))

    crowded = [f"c{i}" for i in range(5000) if hashmap_spread(f"c{i}") & 15 == 3]
    key_lists = []
    for _ in range(300):
        kind = rng.randrange(3)
        size = rng.randrange(1, 45)
        if kind == 0:
            keys = [word(10) for _ in range(size)]
        elif kind == 1:
            keys = rng.sample(crowded, min(size, 20)) + [word(6) for _ in range(size // 3)]
        else:
            keys = rng.sample(_AA_BB, rng.randrange(1, 11)) + [word(4) for _ in range(size // 4)]
        try:
            hashmap_order(keys)
        except javahash.JavaEncodingError:
            continue
        key_lists.append(keys)
    values: list[Callable[[], Any]] = [
        lambda: word(12),
        lambda: rng.randrange(-(2**63), 2**63),
        lambda: rng.randrange(-1000, 1000),
        lambda: rng.choice([True, False, None]),
    ]
    partitions = [
        {word(8): rng.choice(values)() for _ in range(rng.randrange(1, 8))} for _ in range(150)
    ]
    return {
        "hash_strings": [word(30) for _ in range(300)],
        "murmur_hex": [rng.randbytes(rng.randrange(0, 80)).hex() for _ in range(300)],
        "hashmap_keys": key_lists,
        "keys": [{"name": word(20), "partition": p} for p in partitions],
    }


def test_randomised_cases_match_the_jvm(tmp_path: Path) -> None:
    """Hundreds of random cases through the JVM at once: hashCode, murmur2, HashMap, keys."""
    cases = _random_cases(random.Random(20250509))  # noqa: S311 - test data, not secrets
    java = _run_java(tmp_path, cases)
    assert [string_hash(s) for s in cases["hash_strings"]] == java["hash_codes"]
    assert [murmur2(bytes.fromhex(h)) for h in cases["murmur_hex"]] == java["murmur2"]
    assert [hashmap_order(k) for k in cases["hashmap_keys"]] == java["hashmap_orders"]
    for case, got in zip(cases["keys"], java["keys"], strict=True):
        name, partition = case["name"], case["partition"]
        assert encode_offset_key(name, partition).hex() == got["as_is"]
        rest_order = {k: partition[k] for k in hashmap_order(partition)}
        assert encode_offset_key(name, rest_order).hex() == got["rest"]
        assert java_partition(bytes.fromhex(got["as_is"]), 25) == got["partition_25"]


# -- reading: conflicts and malformed records ---------------------------------------------------


def key(connector: str, partition: dict[str, Any]) -> bytes:
    return encode_offset_key(connector, partition)


def rec(p: int, o: int, k: bytes | None, v: bytes | None, ts: int | None = None) -> RawRecord:
    return RawRecord(p, o, 1000 + o if ts is None else ts, k, v)


def placed(
    connector: str, partition: dict[str, Any], offset: int, value: bytes | None
) -> RawRecord:
    k = key(connector, partition)
    return rec(java_partition(k, 25), offset, k, value)


def view_of(records: Sequence[RawRecord], **kwargs: Any) -> OffsetsView:
    return build_view("connect-offsets", 25, {}, records, **kwargs)


def test_latest_record_per_key_wins_and_tombstones_remove() -> None:
    a: PartitionMap = {"filename": "a"}
    b: PartitionMap = {"filename": "b"}
    view = view_of(
        [
            placed("c", a, 0, b'{"position":1}'),
            placed("c", a, 1, b'{"position":2}'),
            placed("c", b, 2, b'{"position":7}'),
            placed("c", b, 3, None),
        ]
    )
    assert view.records_read == 4
    assert view.entries("c") == [OffsetEntry(a, {"position": 2})]
    lp = view.lookup("c", {"filename": "b"})
    assert lp is not None
    assert lp.offset is None
    assert not lp.conflict
    assert view.conflicts() == []
    assert view.malformed == ()


def test_two_byte_forms_of_one_partition_are_a_conflict() -> None:
    part = mirror_partition("east", "orders", 0)
    canonical = key("m", part)
    other = b'["m",{"topic":"orders","partition":0,"cluster":"east"}]'  # REST-less writer's order
    view = view_of(
        [
            rec(java_partition(canonical, 25), 5, canonical, b'{"offset":10}', ts=1),
            rec(java_partition(other, 25), 9, other, b'{"offset":99}', ts=2),
        ]
    )
    (conflict,) = view.conflicts()
    assert {f.key for f in conflict.forms} == {canonical, other}
    assert conflict.offset == {"offset": 99}  # the newest form by timestamp
    assert conflict.partition == {"topic": "orders", "partition": 0, "cluster": "east"}
    assert "in topic partition" in conflict.describe()
    assert conflict.as_json()["conflict"] is True


def test_one_key_in_two_topic_partitions_is_a_conflict_until_every_copy_is_a_tombstone() -> None:
    k = key("c", {"filename": "a"})
    right, wrong = java_partition(k, 25), (java_partition(k, 25) + 1) % 25
    live_both = view_of([rec(right, 0, k, b'{"position":1}'), rec(wrong, 0, k, b'{"position":2}')])
    assert len(live_both.conflicts()) == 1
    one_dead = view_of([rec(right, 0, k, b'{"position":1}'), rec(wrong, 0, k, None)])
    assert len(one_dead.conflicts()) == 1  # which copy wins depends on the read order
    both_dead = view_of([rec(right, 0, k, None), rec(wrong, 0, k, None)])
    assert both_dead.conflicts() == []


def test_a_tombstoned_old_form_is_settled() -> None:
    canonical = key("c", {"x": 1, "y": 2})
    other = key("c", {"y": 2, "x": 1})
    view = view_of(
        [
            rec(3, 0, other, b'{"o":1}', ts=1),
            rec(3, 1, other, None, ts=2),
            rec(5, 0, canonical, b'{"o":2}', ts=3),
        ]
    )
    assert view.conflicts() == []
    assert view.entries("c") == [OffsetEntry({"x": 1, "y": 2}, {"o": 2})]


MALFORMED = [
    (b"not json", b"{}", "the key is not JSON"),
    (b"\xff\xfe", b"{}", "the key is not JSON"),
    (b'["a", {}, 3]', b"{}", "the key is not a JSON array of two elements"),
    (b'{"a": 1}', b"{}", "the key is not a JSON array of two elements"),
    (b'[1, {"a": 1}]', b"{}", "the key is not [connector name, partition object]"),
    (b'["a", [1]]', b"{}", "the key is not [connector name, partition object]"),
    (b'["a", {"x": {"y": 1}}]', b"{}", "the partition object holds a nested value"),
    (None, b"{}", "the record has no key"),
    (b'["a", {"x": 1}]', b"nope", "the value is not JSON"),
    (b'["a", {"x": 2}]', b"[1]", "the value is not a JSON object or null"),
    (b'["a", {"x": 3}]', b'{"o": [1]}', "the offset object holds a nested value"),
]


def test_malformed_records_are_counted_with_their_position_never_raised() -> None:
    records = [rec(4, i, k, v) for i, (k, v, _) in enumerate(MALFORMED)]
    view = view_of([*records, placed("ok", {"f": "x"}, 0, b'{"p":1}')])
    assert [(m.kafka_partition, m.kafka_offset) for m in view.malformed] == [
        (4, i) for i in range(len(MALFORMED))
    ]
    for m, (_, _, reason) in zip(view.malformed, MALFORMED, strict=True):
        assert m.reason.startswith(reason)
        assert m.topic == "connect-offsets"
    assert list(view.connectors) == ["ok"]
    assert json.dumps(view.as_json())  # printable, bytes included


def test_without_history_a_replaced_malformed_value_is_not_reported_with_history_it_is() -> None:
    k = key("c", {"f": "a"})
    records = [rec(2, 0, k, b"garbage"), rec(2, 1, k, b'{"p":1}')]
    assert view_of(records).malformed == ()
    full = view_of(records, history=True)
    assert [m.kafka_offset for m in full.malformed] == [0]
    assert full.history is not None
    assert [(h.kafka_offset, h.offset) for h in full.history] == [(1, {"p": 1})]


def test_history_is_in_log_order_and_filtered_by_connector() -> None:
    records = [
        placed("a", {"f": "1"}, 0, b'{"p":1}'),
        placed("b", {"f": "1"}, 1, b'{"p":1}'),
        placed("a", {"f": "1"}, 2, None),
    ]
    view = view_of(records, history=True, connectors={"a"})
    assert view.history is not None
    assert [(h.connector, h.kafka_offset, h.offset) for h in view.history] == [
        ("a", 0, {"p": 1}),
        ("a", 2, None),
    ]
    assert set(view.connectors) == {"a"}


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["c1", "c2"]),
            st.sampled_from(["x", "y", "z"]),
            st.one_of(st.none(), st.integers(0, 10**12)),
        ),
        min_size=1,
        max_size=60,
    )
)
@settings(max_examples=200)
def test_connect_like_writes_never_conflict_and_the_last_write_wins(
    writes: list[tuple[str, str, int | None]],
) -> None:
    """A worker writing canonical bytes where murmur2 says: one form per partition, last wins."""
    counters: dict[int, int] = {}
    records = []
    for connector, name, position in writes:
        value = None if position is None else json.dumps({"position": position}).encode()
        k = key(connector, {"filename": name})
        p = java_partition(k, 25)
        counters[p] = counters.get(p, -1) + 1
        records.append(rec(p, counters[p], k, value))
    view = view_of(records)
    assert view.conflicts() == []
    last: dict[tuple[str, str], int | None] = {}
    for connector, name, position in writes:
        last[(connector, name)] = position
    for (connector, name), position in last.items():
        lp = view.lookup(connector, {"filename": name})
        assert lp is not None
        assert lp.offset == (None if position is None else {"position": position})


# -- planning source writes ---------------------------------------------------------------------


def test_existing_key_bytes_are_reused_in_their_topic_partition() -> None:
    odd = b'["c",{"b":2,"a":1}]'  # some writer's order: reused as is
    view = view_of([rec(java_partition(odd, 25), 0, odd, b'{"o":1}')])
    planned, warnings = plan_source_writes(
        "c", [OffsetEntry({"a": 1, "b": 2}, {"o": 5})], view, connector_class="com.x.Unknown"
    )
    (record,) = planned
    assert (record.key, record.value) == (odd, b'{"o":5}')
    assert record.kafka_partition == java_partition(odd, 25)
    assert record.key_source == "existing key"
    assert warnings == []


def test_new_keys_follow_the_class_layout() -> None:
    view = view_of([])
    entries = [
        OffsetEntry(mirror_partition("east", "orders", 3), {"offset": 41}),
        OffsetEntry(mirror_partition("east", "orders", 4), {"offset": 0}),
    ]
    planned, _ = plan_source_writes(
        "east->west.MirrorSourceConnector", entries, view, connector_class="MirrorSourceConnector"
    )
    assert planned[0].key == (
        b'["east->west.MirrorSourceConnector",{"cluster":"east","partition":3,"topic":"orders"}]'
    )
    assert planned[0].value == b'{"offset":41}'
    assert [r.kafka_partition for r in planned] == [java_partition(r.key, 25) for r in planned]
    assert planned[0].key_source == "MirrorSourceConnector (Java HashMap order)"
    file_planned, _ = plan_source_writes(
        "fs",
        [OffsetEntry({"filename": "/d/a.txt"}, {"position": 10})],
        view,
        connector_class=FILE_STREAM_SOURCE_CLASS,
    )
    assert file_planned[0].key == b'["fs",{"filename":"/d/a.txt"}]'


def test_unknown_layout_is_refused_naming_the_partition() -> None:
    with pytest.raises(OfflineError) as refused:
        plan_source_writes(
            "jdbc",
            [OffsetEntry({"table": "t1", "protocol": "1"}, {"id": 5})],
            view_of([]),
            connector_class="io.confluent.connect.jdbc.JdbcSourceConnector",
        )
    text = str(refused.value)
    assert '{"table": "t1", "protocol": "1"}' in text
    assert "--key-template" in text
    assert "JdbcSourceConnector" in text
    assert "nothing was written" in text


def test_a_key_template_sets_the_order_of_new_keys() -> None:
    template = '["jdbc", {"protocol": "1", "table": "any"}]'  # e.g. copied from the topic
    planned, _ = plan_source_writes(
        "jdbc",
        [OffsetEntry({"table": "t2", "protocol": "1"}, {"id": 5})],
        view_of([]),
        connector_class=None,
        key_template=template,
    )
    assert planned[0].key == b'["jdbc",{"protocol":"1","table":"t2"}]'
    assert planned[0].key_source == "the key template"
    with pytest.raises(OfflineError, match="are not the keys"):
        plan_source_writes(
            "jdbc",
            [OffsetEntry({"table": "t2"}, {"id": 5})],
            view_of([]),
            connector_class=None,
            key_template=template,
        )


@pytest.mark.parametrize(
    "template",
    ["", "not json", '["a"]', '["a", {}]', '[1, {"a": null}]', '["a", {"k": 1, "k": 2}]'],
)
def test_bad_key_templates_are_refused(template: str) -> None:
    with pytest.raises(OfflineError, match="key template"):
        parse_key_template(template)


def test_conflicting_partitions_can_only_be_removed_and_removal_hits_every_live_form() -> None:
    canonical = key("c", {"x": 1, "y": 2})
    other = b'["c",{"y":2,"x":1}]'
    view = view_of(
        [
            rec(java_partition(canonical, 25), 0, canonical, b'{"o":1}'),
            rec(java_partition(other, 25), 0, other, b'{"o":2}'),
        ]
    )
    with pytest.raises(OfflineError, match="more than one key form"):
        plan_source_writes(
            "c", [OffsetEntry({"x": 1, "y": 2}, {"o": 3})], view, connector_class=None
        )
    planned, _ = plan_source_writes(
        "c", [OffsetEntry({"x": 1, "y": 2}, None)], view, connector_class=None
    )
    assert {(r.key, r.kafka_partition, r.value) for r in planned} == {
        (canonical, java_partition(canonical, 25), None),
        (other, java_partition(other, 25), None),
    }


def test_a_key_outside_its_java_partition_is_refused() -> None:
    k = key("c", {"f": "a"})
    wrong = (java_partition(k, 25) + 3) % 25
    view = view_of([rec(wrong, 0, k, b'{"p":1}')])
    with pytest.raises(OfflineError, match=f"in topic partition {wrong}, but Java"):
        plan_source_writes("c", [OffsetEntry({"f": "a"}, {"p": 2})], view, connector_class=None)


def test_removing_an_unknown_partition_writes_nothing_and_says_so() -> None:
    planned, warnings = plan_source_writes(
        "c", [OffsetEntry({"f": "a"}, None)], view_of([]), connector_class=None
    )
    assert planned == []
    assert warnings == ['partition {"f": "a"} has no stored offset; nothing to remove']


def test_removing_a_stored_partition_writes_a_tombstone_under_its_key() -> None:
    view = view_of([placed("c", {"f": "a"}, 0, b'{"p":1}')])
    (record,) = plan_source_writes(
        "c", [OffsetEntry({"f": "a"}, None)], view, connector_class=None
    )[0]
    assert (record.key, record.value) == (key("c", {"f": "a"}), None)


@pytest.mark.parametrize(
    ("connector_class", "entry", "why"),
    [
        (MIRROR_SOURCE_CLASS, OffsetEntry(mirror_partition("e", "t", -1), {"offset": 1}), ">= 0"),
        (MIRROR_SOURCE_CLASS, OffsetEntry(mirror_partition("e", "t", 0), {"offset": -1}), ">= 0"),
        (MIRROR_SOURCE_CLASS, OffsetEntry({"cluster": 1, "partition": 0, "topic": "t"}, {}), "str"),
        (
            MIRROR_CHECKPOINT_CLASS,
            OffsetEntry({"group": "g", "topic": "t", "partition": 0}, {"offset": 5}),
            "exactly",
        ),
        (
            MIRROR_HEARTBEAT_CLASS,
            OffsetEntry({"sourceClusterAlias": "a", "targetClusterAlias": "b"}, {"offset": 1}),
            "exactly",
        ),
        (FILE_STREAM_SOURCE_CLASS, OffsetEntry({"filename": "f"}, {"position": "x"}), "position"),
        (None, OffsetEntry({"f": "a"}, {"nested": [1]}), "primitives"),  # type: ignore[dict-item]
    ],
)
def test_what_the_connectors_alter_offsets_would_reject_is_refused(
    connector_class: str | None, entry: OffsetEntry, why: str
) -> None:
    with pytest.raises(OfflineError, match=why):
        plan_source_writes(
            "c", [entry], view_of([]), connector_class=connector_class, key_template='["c",{"f":0}]'
        )


def test_every_problem_is_listed_at_once_and_duplicates_are_refused() -> None:
    entries = [
        OffsetEntry({"f": "a"}, {"p": 1}),
        OffsetEntry({"f": "a"}, {"p": 2}),
        OffsetEntry({"g": "b"}, {"p": 1}),
    ]
    with pytest.raises(OfflineError) as refused:
        plan_source_writes("c", entries, view_of([]), connector_class=None)
    assert "3 partitions cannot be written" in str(refused.value)
    assert "listed twice" in str(refused.value)


# -- planning sink writes -----------------------------------------------------------------------


def test_sink_entries_are_parsed_like_connects_sink_utils() -> None:
    changes = plan_sink_writes(
        [
            OffsetEntry(sink_partition("t", 0), {"kafka_offset": 5}),
            OffsetEntry({"kafka_topic": "t", "kafka_partition": "1"}, {"kafka_offset": "7"}),
            OffsetEntry(sink_partition("t", 2), None),
        ]
    )
    assert changes == [SinkChange("t", 0, 5), SinkChange("t", 1, 7), SinkChange("t", 2, None)]


@pytest.mark.parametrize(
    "entry",
    [
        OffsetEntry({"kafka_topic": "t"}, {"kafka_offset": 1}),
        OffsetEntry({"kafka_topic": "t", "kafka_partition": -1}, {"kafka_offset": 1}),
        OffsetEntry({"kafka_topic": "t", "kafka_partition": True}, {"kafka_offset": 1}),
        OffsetEntry(sink_partition("t", 0), {"kafka_offset": -3}),
        OffsetEntry(sink_partition("t", 0), {"offset": 3}),
        OffsetEntry(sink_partition("", 0), {"kafka_offset": 3}),
    ],
)
def test_bad_sink_entries_are_refused(entry: OffsetEntry) -> None:
    with pytest.raises(OfflineError, match="nothing was written"):
        plan_sink_writes([entry])


# -- the gate -----------------------------------------------------------------------------------


def http_answering(status: int, body: Any = None) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.raw_path == b"/connectors/a%2Fb/status"
        return httpx.Response(status, json=body)

    return httpx.Client(transport=httpx.MockTransport(handler))


def http_refusing() -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    return httpx.Client(transport=httpx.MockTransport(handler))


def status_with(*states: str, connector: str = "RUNNING") -> dict[str, Any]:
    return {
        "name": "a/b",
        "connector": {"state": connector},
        "tasks": [{"id": i, "state": s} for i, s in enumerate(states)],
    }


@pytest.mark.parametrize("state", LIVE_TASK_STATES)
def test_gate_refuses_live_tasks_unless_forced(state: str) -> None:
    with pytest.raises(OfflineRefused, match=f"task 0 {state}") as refused:
        check_offline_allowed(
            "http://w:8083",
            "a/b",
            force=False,
            assume_workers_down=False,
            http=http_answering(200, status_with(state)),
        )
    assert refused.value.exit_code == 14
    assert str(refused.value).count(".") <= 2  # one sentence (dots of "3.5+" aside)
    check_offline_allowed(
        "http://w:8083",
        "a/b",
        force=True,
        assume_workers_down=False,
        http=http_answering(200, status_with(state)),
    )


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, status_with(connector="STOPPED")),
        (200, status_with("FAILED", connector="FAILED")),
        (404, {"error_code": 404, "message": "No status found for connector a/b"}),
    ],
)
def test_gate_allows_a_connector_without_live_tasks(status: int, body: Any) -> None:
    check_offline_allowed(
        "http://w:8083/",
        "a/b",
        force=False,
        assume_workers_down=False,
        http=http_answering(status, body),
    )


def test_the_async_gate_asks_with_the_clients_credentials() -> None:
    """The offline commands' gate asks through the online commands' client (basic auth, CA):
    a worker that wants credentials shows its live task to it, and only a 401 to a bare one."""

    def handler(request: httpx.Request) -> httpx.Response:
        if not request.headers.get("authorization", "").startswith("Basic "):
            return httpx.Response(401, json={"error_code": 401, "message": "Unauthorized"})
        return httpx.Response(200, json=status_with("RUNNING"))

    def refused(client: httpx.AsyncClient) -> str:
        async def ask() -> None:
            async with client:
                await acheck_offline_allowed(
                    "https://w:8083", "a/b", force=False, assume_workers_down=False, http=client
                )

        with pytest.raises(OfflineRefused) as caught:
            asyncio.run(ask())
        return str(caught.value)

    transport = httpx.MockTransport(handler)
    assert "task 0 RUNNING" in refused(httpx.AsyncClient(transport=transport, auth=("u", "p")))
    assert "answered 401" in refused(httpx.AsyncClient(transport=transport))


@pytest.mark.parametrize(("status", "body"), [(401, None), (503, None), (200, ["odd"])])
def test_gate_refuses_an_unclear_answer_unless_forced(status: int, body: Any) -> None:
    with pytest.raises(OfflineRefused, match=f"answered {status}"):
        check_offline_allowed(
            "http://w:8083",
            "a/b",
            force=False,
            assume_workers_down=False,
            http=http_answering(status, body),
        )
    check_offline_allowed(
        "http://w:8083", "a/b", force=True, assume_workers_down=False, http=http_answering(status)
    )


def test_gate_needs_assume_workers_down_when_nothing_answers() -> None:
    with pytest.raises(OfflineRefused, match="--assume-workers-down"):
        check_offline_allowed(
            "http://w:8083", "a/b", force=True, assume_workers_down=False, http=http_refusing()
        )
    check_offline_allowed(
        "http://w:8083", "a/b", force=False, assume_workers_down=True, http=http_refusing()
    )
    with pytest.raises(OfflineRefused, match="no Connect REST URL"):
        check_offline_allowed(None, "a/b", force=True, assume_workers_down=False)
    check_offline_allowed(None, "a/b", force=False, assume_workers_down=True)


def test_partition_identity_is_the_models() -> None:
    view = view_of([placed("c", {"b": 1, "a": 2}, 0, b'{"p":1}')])
    (pkey,) = view.connectors["c"]
    assert pkey == partition_key({"a": 2, "b": 1})
    assert view.lookup("c", {"a": 2, "b": 1}) is not None
