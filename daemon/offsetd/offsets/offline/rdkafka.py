"""`DeleteConsumerGroupOffsets` through librdkafka itself, which confluent-kafka does not expose.

Connect removes a sink partition's offset with `Admin.deleteConsumerGroupOffsets` (Kafka's
OffsetDelete request). confluent-kafka's Python `AdminClient` has no binding for it, but the
librdkafka build it is linked against has had `rd_kafka_DeleteConsumerGroupOffsets` since 1.6.
This module calls that C function with ctypes on a short-lived admin handle built from the same
client configuration (so TLS and SASL settings apply unchanged). The broker then enforces the
same rule as for Java: it refuses while a member of the group is subscribed to the topic.

Only the stable public C API is used: opaque handles, plus the two documented structs
`rd_kafka_topic_partition_t` / `rd_kafka_topic_partition_list_t` to read per-partition errors.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from collections.abc import Mapping, Sequence
from functools import cache

import confluent_kafka

__all__ = ["RdkafkaUnavailable", "available", "delete_consumer_group_offsets"]

_PRODUCER = 0  # RD_KAFKA_PRODUCER: any handle type can run admin requests
_ADMIN_OP_DELETECONSUMERGROUPOFFSETS = 8  # rd_kafka_admin_op_t
_ERRSTR = 512


class RdkafkaUnavailable(RuntimeError):
    """The librdkafka library behind confluent-kafka could not be loaded or lacks the call."""


class _TopicPartition(ctypes.Structure):
    _fields_ = [
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("metadata", ctypes.c_void_p),
        ("metadata_size", ctypes.c_size_t),
        ("opaque", ctypes.c_void_p),
        ("err", ctypes.c_int),
        ("_private", ctypes.c_void_p),
    ]


class _TopicPartitionList(ctypes.Structure):
    _fields_ = [
        ("cnt", ctypes.c_int),
        ("size", ctypes.c_int),
        ("elems", ctypes.POINTER(_TopicPartition)),
    ]


_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_version": (ctypes.c_int, []),
    "rd_kafka_conf_new": (ctypes.c_void_p, []),
    "rd_kafka_conf_set": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t],
    ),
    "rd_kafka_conf_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_new": (
        ctypes.c_void_p,
        [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t],
    ),
    "rd_kafka_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_queue_new": (ctypes.c_void_p, [ctypes.c_void_p]),
    "rd_kafka_queue_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_queue_poll": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "rd_kafka_topic_partition_list_new": (ctypes.c_void_p, [ctypes.c_int]),
    "rd_kafka_topic_partition_list_add": (
        ctypes.c_void_p,
        [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32],
    ),
    "rd_kafka_topic_partition_list_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_DeleteConsumerGroupOffsets_new": (
        ctypes.c_void_p,
        [ctypes.c_char_p, ctypes.c_void_p],
    ),
    "rd_kafka_DeleteConsumerGroupOffsets_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_DeleteConsumerGroupOffsets": (
        None,
        [
            ctypes.c_void_p,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.c_size_t,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ],
    ),
    "rd_kafka_AdminOptions_new": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "rd_kafka_AdminOptions_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_AdminOptions_set_request_timeout": (
        ctypes.c_int,
        [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t],
    ),
    "rd_kafka_event_error": (ctypes.c_int, [ctypes.c_void_p]),
    "rd_kafka_event_error_string": (ctypes.c_char_p, [ctypes.c_void_p]),
    "rd_kafka_event_destroy": (None, [ctypes.c_void_p]),
    "rd_kafka_event_DeleteConsumerGroupOffsets_result": (ctypes.c_void_p, [ctypes.c_void_p]),
    "rd_kafka_DeleteConsumerGroupOffsets_result_groups": (
        ctypes.POINTER(ctypes.c_void_p),
        [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)],
    ),
    "rd_kafka_group_result_error": (ctypes.c_void_p, [ctypes.c_void_p]),
    "rd_kafka_group_result_partitions": (
        ctypes.POINTER(_TopicPartitionList),
        [ctypes.c_void_p],
    ),
    "rd_kafka_error_code": (ctypes.c_int, [ctypes.c_void_p]),
    "rd_kafka_error_string": (ctypes.c_char_p, [ctypes.c_void_p]),
    "rd_kafka_err2str": (ctypes.c_char_p, [ctypes.c_int]),
}


def _candidates() -> list[str]:
    """The librdkafka that confluent-kafka's wheel bundles first, then a system one."""
    package = os.path.dirname(confluent_kafka.__file__)
    found = sorted(glob.glob(os.path.join(package + ".libs", "librdkafka*.so*")))
    found += sorted(glob.glob(os.path.join(package, ".dylibs", "librdkafka*.dylib")))
    system = ctypes.util.find_library("rdkafka")
    return found + ([system] if system else [])


@cache
def _library() -> ctypes.CDLL:
    wanted = confluent_kafka.libversion()[1]
    problems = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
            for name, (restype, argtypes) in _SIGNATURES.items():
                function = getattr(lib, name)
                function.restype = restype
                function.argtypes = argtypes
        except (OSError, AttributeError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if lib.rd_kafka_version() != wanted:
            problems.append(f"{path} is not the librdkafka confluent-kafka uses")
            continue
        return lib
    raise RdkafkaUnavailable(
        "librdkafka's DeleteConsumerGroupOffsets is not reachable ("
        + ("; ".join(problems) or "no librdkafka library found")
        + ")"
    )


def available() -> bool:
    try:
        _library()
    except RdkafkaUnavailable:
        return False
    return True


def delete_consumer_group_offsets(
    conf: Mapping[str, str],
    group: str,
    partitions: Sequence[tuple[str, int]],
    timeout_s: float,
) -> dict[tuple[str, int], str | None]:
    """Delete the group's committed offsets for `partitions`.

    Returns, for every requested partition, None on success or the broker's error text. Raises
    `RdkafkaUnavailable` when librdkafka cannot be used, `RuntimeError` when the request as a
    whole failed (bad configuration, timeout, group-level error).
    """
    lib = _library()
    errstr = ctypes.create_string_buffer(_ERRSTR)
    timeout_ms = max(1, int(timeout_s * 1000))
    rk_conf = lib.rd_kafka_conf_new()
    for name, value in conf.items():
        if lib.rd_kafka_conf_set(rk_conf, name.encode(), str(value).encode(), errstr, _ERRSTR):
            lib.rd_kafka_conf_destroy(rk_conf)
            raise RuntimeError(f"client setting {name} was refused: {errstr.value.decode()}")
    rk = lib.rd_kafka_new(_PRODUCER, rk_conf, errstr, _ERRSTR)
    if not rk:
        lib.rd_kafka_conf_destroy(rk_conf)
        raise RuntimeError(f"cannot create a librdkafka client: {errstr.value.decode()}")
    queue = lib.rd_kafka_queue_new(rk)
    try:
        tp_list = lib.rd_kafka_topic_partition_list_new(len(partitions))
        for topic, partition in partitions:
            lib.rd_kafka_topic_partition_list_add(tp_list, topic.encode(), partition)
        request = lib.rd_kafka_DeleteConsumerGroupOffsets_new(group.encode(), tp_list)
        lib.rd_kafka_topic_partition_list_destroy(tp_list)  # the request holds a copy
        options = lib.rd_kafka_AdminOptions_new(rk, _ADMIN_OP_DELETECONSUMERGROUPOFFSETS)
        lib.rd_kafka_AdminOptions_set_request_timeout(options, timeout_ms, errstr, _ERRSTR)
        requests = (ctypes.c_void_p * 1)(request)
        lib.rd_kafka_DeleteConsumerGroupOffsets(rk, requests, 1, options, queue)
        lib.rd_kafka_AdminOptions_destroy(options)
        lib.rd_kafka_DeleteConsumerGroupOffsets_destroy(request)
        event = lib.rd_kafka_queue_poll(queue, timeout_ms + 5000)
        if not event:
            raise RuntimeError(f"no answer within {timeout_s:.0f} s")
        try:
            return _results(lib, event, partitions)
        finally:
            lib.rd_kafka_event_destroy(event)
    finally:
        lib.rd_kafka_queue_destroy(queue)
        lib.rd_kafka_destroy(rk)


def _results(
    lib: ctypes.CDLL, event: int, partitions: Sequence[tuple[str, int]]
) -> dict[tuple[str, int], str | None]:
    if lib.rd_kafka_event_error(event):
        raise RuntimeError(lib.rd_kafka_event_error_string(event).decode())
    result = lib.rd_kafka_event_DeleteConsumerGroupOffsets_result(event)
    count = ctypes.c_size_t()
    groups = lib.rd_kafka_DeleteConsumerGroupOffsets_result_groups(result, ctypes.byref(count))
    if count.value != 1:
        raise RuntimeError(f"expected one group result, got {count.value}")
    group_result = groups[0]
    error = lib.rd_kafka_group_result_error(group_result)
    if error:
        raise RuntimeError(lib.rd_kafka_error_string(error).decode())
    answered: dict[tuple[str, int], str | None] = {}
    tp_list = lib.rd_kafka_group_result_partitions(group_result)
    if tp_list:
        for i in range(tp_list.contents.cnt):
            elem = tp_list.contents.elems[i]
            key = ((elem.topic or b"").decode(), int(elem.partition))
            answered[key] = lib.rd_kafka_err2str(elem.err).decode() if elem.err else None
    return {tp: answered.get(tp, "no answer for this partition") for tp in partitions}
