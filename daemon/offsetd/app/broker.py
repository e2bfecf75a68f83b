"""The faust app itself: its broker settings and credentials, its topic and table, its worker.

faust is imported in this package only (import contract `faust-in-app`): the command line asks
`run_worker` to run what `build_app` made.
"""

from __future__ import annotations

import ssl
from typing import Any

import faust
from faust.transport.drivers.aiokafka import credentials_to_aiokafka_auth

from offsetd.app.wiring import Wiring
from offsetd.config import KafkaCluster
from offsetd.ingest import EVENTS_MAX_MESSAGE_BYTES
from offsetd.oauthtoken import tokens_of
from offsetd.remediation.dead_members import client_id

__all__ = [
    "STATE_TABLE",
    "aiokafka_auth",
    "events_topic_of",
    "faust_credentials",
    "new_faust_app",
    "run_worker",
    "state_table_of",
]

STATE_TABLE = "connector-state"  # the Table's name; its changelog is <app id>-<name>-changelog


def faust_credentials(cluster: KafkaCluster) -> Any:
    """faust's broker credentials for a cluster's TLS/SASL settings (None for PLAINTEXT)."""
    context: ssl.SSLContext | None = None
    if cluster.uses_tls:
        tls = cluster.tls
        context = ssl.create_default_context(
            cafile=str(tls.ca_file) if tls is not None and tls.ca_file else None
        )
        if tls is not None and tls.cert_file and tls.key_file:
            password = tls.key_password.get_secret_value() if tls.key_password else None
            context.load_cert_chain(str(tls.cert_file), str(tls.key_file), password=password)
        if tls is not None and not tls.check_hostname:
            context.check_hostname = False
    if cluster.uses_sasl and cluster.sasl is not None and cluster.sasl.oauth is not None:
        # the same client-credentials settings librdkafka's clients get from client_config()
        tokens = tokens_of(cluster.client_config())
        return faust.OAuthCredentials(oauth_cb=tokens, ssl_context=context)
    if cluster.uses_sasl and cluster.sasl is not None:
        login = cluster.client_config()  # the user and password, as librdkafka gets them
        return faust.SASLCredentials(
            username=login["sasl.username"],
            password=login["sasl.password"],
            mechanism=cluster.sasl.mechanism,
            ssl_context=context,
        )
    if context is not None:
        return faust.SSLCredentials(context)
    return None


def aiokafka_auth(cluster: KafkaCluster) -> Any:
    """The same credentials in aiokafka's form (for the group's LeaveGroup before the join)."""
    return credentials_to_aiokafka_auth(faust_credentials(cluster))


def new_faust_app(wiring: Wiring) -> faust.App:
    """The app with the daemon's group timings, acks=all, and this worker's client id."""
    settings = wiring.settings.daemon
    servers = [f"kafka://{s}" for s in wiring.kafka.bootstrap_servers.split(",")]
    return faust.App(
        settings.app_id,
        broker=servers,
        broker_credentials=faust_credentials(wiring.kafka),
        store="memory://",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor or 1,
        consumer_auto_offset_reset="earliest",
        web_enabled=True,
        web_host=settings.web_host,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        datadir=str(settings.data_dir),
        producer_acks=-1,
        broker_session_timeout=settings.group_session_timeout / 1000,
        broker_heartbeat_interval=settings.group_heartbeat_interval / 1000,
        broker_rebalance_timeout=settings.group_rebalance_timeout / 1000,
        # faust refuses a session timeout above the request timeout (default 90 s)
        broker_request_timeout=max(90.0, settings.group_session_timeout / 1000),
        # names this worker's liveness beacon, by which a restart drops it from the group
        broker_client_id=client_id(wiring.remediator.owner) if wiring.remediator else "offsetd",
    )


def events_topic_of(app: faust.App, name: str, partitions: int) -> Any:
    """The internal events topic: frames and nudges, keyed by owner, raw bytes."""
    return app.topic(
        name,
        partitions=partitions,
        internal=True,  # faust creates it, with exactly this partition count
        config={"max.message.bytes": str(EVENTS_MAX_MESSAGE_BYTES)},  # a large record passes
        key_type=str,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )


def state_table_of(app: faust.App, partitions: int) -> Any:
    """Each connector's engine state, as JSON text, in a changelog-backed Table."""
    return app.Table(
        STATE_TABLE,
        default=None,
        partitions=partitions,
        key_type=str,
        value_type=str,  # the engine state as JSON text
    )


def run_worker(app: faust.App, log_level: str) -> None:
    """Run the app in a faust worker until it is stopped (blocks; `offsetd run`)."""
    worker = faust.Worker(app, loglevel=log_level)
    worker.execute_from_commandline()
