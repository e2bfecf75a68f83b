"""A Kafka AdminClient whose first per-partition request does not wait three seconds.

librdkafka finds partition leaders for ListOffsets (and the other per-partition admin calls) in
its metadata cache. Missing ones make it ask for metadata and wait for the cache to change or
for a fixed 3 s timer (`rd_kafka_topic_partition_list_query_leaders_async_worker`). On a new
client that metadata request can be issued before any broker connection is up and go nowhere,
so the first ListOffsets of a fresh client took 3.0 s in about one of six tries on the local
stack (and about one `offsetd lag` in five). A DescribeCluster first waits for a connection and
costs a few milliseconds; it needs no ACL (cluster DESCRIBE only when authorized operations are
asked for, which they are not).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["connected_admin"]


def connected_admin(conf: Mapping[str, str], timeout_s: float = 10.0) -> AdminClient:
    """A new AdminClient of `conf`, returned once a broker answered (or `timeout_s` passed).

    A cluster that does not answer is not an error here: the caller's own request reports it,
    in the caller's words.
    """
    admin = AdminClient(dict(conf))
    with contextlib.suppress(KafkaException, TimeoutError):
        admin.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s)
    return admin
