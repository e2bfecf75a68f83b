"""A Kafka AdminClient whose first per-partition request does not wait three seconds.

librdkafka finds partition leaders for ListOffsets (and the other per-partition admin calls) in
its metadata cache. Missing ones make it ask for metadata and wait for the cache to change or
for a fixed 3 s timer (`rd_kafka_topic_partition_list_query_leaders_async_worker`). On a new
client that metadata request can be issued before any broker connection is up and go nowhere,
so the first ListOffsets of a fresh client took 3.0 s in about one of six tries on the local
stack (and about one `offsetd lag` in five). A DescribeCluster first waits for a connection and
costs a few milliseconds; it needs no ACL (cluster DESCRIBE only when authorized operations are
asked for, which they are not).

That first DescribeCluster is also where a refused login or an untrusted certificate shows:
librdkafka reports those only through the error callback, so the client is built with
`offsetd.kafkalogin`'s watch and fails at once with `KafkaAuthFailed` / `TlsFailed` instead of
letting the caller's request time out as a "broker transport failure".
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka.admin import AdminClient

from offsetd.kafkalogin import answering_admin

__all__ = ["connected_admin"]


def connected_admin(
    conf: Mapping[str, str], timeout_s: float = 10.0, where: str | None = None
) -> AdminClient:
    """A new AdminClient of `conf`, returned once a broker answered (or `timeout_s` passed).

    A cluster that does not answer is not an error here: the caller's own request reports it,
    in the caller's words. One that refuses the login or the TLS handshake is: KafkaAuthFailed
    or TlsFailed, naming `where` (default: the bootstrap servers).
    """
    return answering_admin(conf, where, timeout_s)
