"""Consumer groups as their coordinators tell them, through aiokafka's admin client (pure Python).

What lag collection asks of a group: its committed offsets (a sink's progress, a checkpointed
group's position); and of a cluster, its consumer groups' names (ListGroups: which groups the
`lag.failover_groups` globs expect to fail over). Not through librdkafka: its admin requests to
a group coordinator (ListConsumerGroupOffsets, DescribeConsumerGroups; confluent-kafka 2.16.1,
librdkafka 2.16.0) take the whole process down when the coordinator's broker goes away while one
is in flight (SIGSEGV) or comes back after one timed out (`rd_kafka_enq_once_del_source_return:
Assertion 'eonce->refcnt > 0' failed`). Reproduced on the local stack with one request a second
across a broker restart, and seen to kill a daemon in the suite. aiokafka (faust's transport,
installed with it) raises instead: the same loop across a broker restart survived, and read the
groups again once the broker was back.

Its members are not asked for: aiokafka 0.14 fails to decode many DescribeGroups answers from
Kafka 4.2 ("Buffer underrun decoding string": empty consumer groups, Connect's worker group),
and librdkafka's DescribeConsumerGroups is a coordinator request like the others.

`GroupReader` owns an event loop of its own, run in the caller's thread (the collection thread:
never the daemon's loop), and one admin client: made again after it fails to start, and
reconnecting by itself once started.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient  # type: ignore[import-untyped]
from aiokafka.errors import GroupAuthorizationFailedError  # type: ignore[import-untyped]

from offsetd.kafkaaccess import DENIED, denied
from offsetd.oauthtoken import tokens_of

__all__ = ["GroupReader", "aiokafka_options"]

log = logging.getLogger(__name__)

TP = tuple[str, int]
_SASL = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def aiokafka_options(conf: Mapping[str, str]) -> dict[str, Any]:
    """aiokafka's connection options for a librdkafka client config (TLS, SASL PLAIN/SCRAM,
    OAUTHBEARER through the same OAuth client librdkafka's clients use)."""
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    options: dict[str, Any] = {
        "bootstrap_servers": conf["bootstrap.servers"],
        "security_protocol": protocol,
    }
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=conf.get("ssl.ca.location") or None)
        cert, key = conf.get("ssl.certificate.location"), conf.get("ssl.key.location")
        if cert and key:
            context.load_cert_chain(cert, key, password=conf.get("ssl.key.password") or None)
        if str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
        options["ssl_context"] = context
    if protocol.startswith("SASL"):
        mechanism = str(conf.get("sasl.mechanism", "PLAIN")).upper()
        if mechanism == "OAUTHBEARER":
            options.update(sasl_mechanism=mechanism, sasl_oauth_token_provider=tokens_of(conf))
            return options
        if mechanism not in _SASL:
            raise ValueError(f"sasl.mechanism {mechanism} is not supported for group reads")
        options.update(
            sasl_mechanism=mechanism,
            sasl_plain_username=conf.get("sasl.username"),
            sasl_plain_password=conf.get("sasl.password"),
        )
    return options


class GroupReader:
    """Committed offsets of groups, `concurrency` groups at a time."""

    def __init__(self, conf: Mapping[str, str], *, concurrency: int = 64) -> None:
        self.conf = dict(conf)
        self.concurrency = concurrency
        self._loop = asyncio.new_event_loop()
        self._admin: AIOKafkaAdminClient | None = None

    def offsets(
        self, groups: Iterable[str], timeout_s: float = 10.0
    ) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
        """Each group's committed offsets; failures per group (an ACL missing named)."""
        wanted = sorted(set(groups))
        if not wanted:
            return {}, {}
        return self._run(self._offsets(wanted), timeout_s, wanted)

    def names(self, timeout_s: float = 10.0) -> tuple[set[str] | None, str | None]:
        """The cluster's consumer groups (ListGroups, every broker), or None and why not.

        A broker lists only the groups this principal may DESCRIBE: a group without that ACL is
        missing here, not an error. Groups of other protocols (Connect's workers) are left out.
        """
        try:
            listed: set[str] = self._run_plain(self._names(), timeout_s)
        except Exception as exc:  # timed out or could not start: the same as `offsets`
            self._drop()
            if isinstance(exc, TimeoutError):
                return None, "listing groups: no answer in time (a broker away?)"
            return None, f"listing groups: {exc!r}"
        return listed, None

    def close(self) -> None:
        if self._admin is not None:
            self._run_plain(self._admin.close(), 10.0)
            self._admin = None
        self._loop.close()

    # -- the loop ------------------------------------------------------------------------------

    def _run_plain(self, coro: Any, timeout_s: float) -> Any:
        return self._loop.run_until_complete(asyncio.wait_for(coro, timeout_s))

    def _run(
        self, coro: Any, timeout_s: float, groups: list[str]
    ) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
        try:
            result: tuple[dict[str, dict[TP, int]], dict[str, str]] = self._run_plain(
                coro, timeout_s
            )
        except Exception as exc:  # timed out or could not start: every group unknown
            self._drop()
            return {}, {group: _text(exc, self.conf, group) for group in groups}
        if any(not _refused(message) for message in result[1].values()):
            self._drop()  # a broker away: fresh connections next time
        return result

    def _drop(self) -> None:
        """Forget the client after a failure: aiokafka's connections to a broker that went away
        and came back were seen to fail for good, while its loop sleeps between cycles; a new
        client costs one bootstrap request."""
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                self._run_plain(admin.close(), 10.0)
            except Exception as exc:  # it is gone either way
                log.debug("closing a failed group reader: %s", exc)

    async def _started(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(
                **aiokafka_options(self.conf), client_id="offsetd-lag", request_timeout_ms=10_000
            )
            try:
                await admin.start()
            except BaseException:
                await admin.close()  # made again next time
                raise
            self._admin = admin
        return self._admin

    async def _offsets(self, groups: list[str]) -> tuple[dict[str, dict[TP, int]], dict[str, str]]:
        admin = await self._started()
        gate = asyncio.Semaphore(self.concurrency)
        found: dict[str, dict[TP, int]] = {}
        failed: dict[str, str] = {}

        async def one(group: str) -> None:
            async with gate:
                try:
                    offsets = await admin.list_consumer_group_offsets(group)
                except Exception as exc:
                    failed[group] = _text(exc, self.conf, group)
                    return
            found[group] = {
                (tp.topic, tp.partition): int(meta.offset)
                for tp, meta in offsets.items()
                if meta.offset is not None and meta.offset >= 0
            }

        await asyncio.gather(*(one(group) for group in groups))
        return found, failed

    async def _names(self) -> set[str]:
        admin = await self._started()
        listed = await admin.list_consumer_groups()
        # (group, protocol type): "consumer", or "" for a group that only commits offsets
        return {str(entry[0]) for entry in listed if str(entry[1]) in _CONSUMER_PROTOCOLS}


_CONSUMER_PROTOCOLS = ("consumer", "")


def _refused(message: str) -> bool:
    """A failure that says the principal lacks an ACL (the client is fine)."""
    return message.startswith(DENIED)


def _text(exc: BaseException, conf: Mapping[str, str], group: str) -> str:
    if isinstance(exc, GroupAuthorizationFailedError):
        refused = denied("Group authorization failed", conf, group=("DESCRIBE", group))
        if refused is not None:
            return str(refused)
    if isinstance(exc, TimeoutError):
        return f"group {group}: no answer in time (its coordinator away?)"
    return f"group {group}: {exc!r}"
