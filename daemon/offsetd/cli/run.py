"""`offsetd run`: the daemon (what it decided: `offsetd history`, cli/history.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from prometheus_client import CollectorRegistry

from offsetd.audit import AuditLog
from offsetd.cli.common import reports_errors
from offsetd.config import DEFAULT_CONFIG_PATH, Settings, load_settings
from offsetd.connect.client import ConnectClient
from offsetd.errors import (
    ConfigError,
    ConnectUnavailable,
    KafkaAccessDenied,
    KafkaAuthFailed,
    OffsetdError,
    TlsFailed,
)
from offsetd.kafkaaccess import denied
from offsetd.kafkalogin import checked_config

__all__ = [
    "ClusterMismatch",
    "check_cluster_ids",
    "config_option",
    "run",
    "wait_for_clusters",
]

config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="OFFSETD_CONFIG",
    default=str(DEFAULT_CONFIG_PATH),
    show_default=True,
)


class ClusterMismatch(OffsetdError):
    exit_code = 20


def check_cluster_ids(settings: Settings, alias: str) -> None:
    """Every Connect cluster must report the Kafka cluster id of the bootstrap we read."""
    kafka = settings.kafka_clusters[alias]
    cluster_id = (
        AdminClient(dict[str, Any](checked_config(settings, alias)))
        .list_topics(timeout=20)
        .cluster_id
    )

    async def connect_ids() -> dict[str, str]:
        ids = {}
        for name, cluster in settings.connect_clusters.items():
            if cluster.kafka_cluster != alias:
                continue
            async with ConnectClient.for_cluster(cluster) as client:
                ids[name] = str((await client.root()).get("kafka_cluster_id"))
        return ids

    for name, connect_id in asyncio.run(connect_ids()).items():
        if connect_id != cluster_id:
            raise ClusterMismatch(
                f"Connect cluster {name} reports Kafka cluster id {connect_id}, but "
                f"{alias} ({kafka.bootstrap_servers}) is {cluster_id}: fix kafka_cluster for {name}"
            )


def wait_for_clusters(
    settings: Settings, alias: str, retry_s: float = 5.0, sleep: Any = time.sleep
) -> None:
    """`check_cluster_ids`, retried while Kafka or a Connect cluster does not answer yet.

    At start, a cluster may be restarting, or pods may start in any order: the daemon waits,
    saying why, instead of exiting into a restart loop (on Kubernetes its startup probe gives
    up first). A refused login, an untrusted certificate or Connect's 401/403 are waited out the
    same way: a person fixes the Secret and the daemon goes on without a restart. Meanwhile
    `/healthz` answers alive and `/readyz` not ready with the reason (`StartupHealth`); the log
    says each new reason once. A wrong cluster id is a configuration mistake: raised.
    """
    from offsetd.app.startup_health import StartupHealth

    log = logging.getLogger("offsetd")
    health = StartupHealth(settings.daemon.web_host, settings.daemon.web_port)
    last = None
    try:
        while True:
            try:
                check_cluster_ids(settings, alias)
                check_group_access(settings, alias)
                return
            except _WAITED_OUT as exc:
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                health.waiting(reason)
                if reason != last:
                    log.warning("not ready: %s; retrying every %gs", reason, retry_s)
                    last = reason
                sleep(retry_s)
    finally:
        health.stop()
        if last is not None:
            log.info("the clusters answer: starting")


def check_group_access(settings: Settings, alias: str) -> None:
    """READ on the daemon's consumer groups: without it faust would wait for a join in silence.
    A probe that gets no answer decides nothing (the join then says what it says)."""
    from aiokafka.errors import KafkaError as AioKafkaError  # type: ignore[import-untyped]

    from offsetd.app.broker import aiokafka_auth
    from offsetd.app.group_access import daemon_groups, refused_groups

    kafka = settings.kafka_clusters[alias]
    probe = refused_groups(daemon_groups(settings), kafka.bootstrap_servers, aiokafka_auth(kafka))
    try:
        refused = asyncio.run(probe)
    except (AioKafkaError, OSError, TimeoutError):
        return
    if refused:
        error = denied(
            KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED),
            kafka.client_config(),
            group=("READ", refused[0]),
        )
        assert error is not None
        raise error


# What keeps the daemon waiting at start (not ready) rather than exiting: a cluster that does
# not answer yet, and credentials, certificates or ACLs a person can fix while it waits.
_WAITED_OUT = (KafkaException, ConnectUnavailable, KafkaAuthFailed, TlsFailed, KafkaAccessDenied)


@click.command()
@config_option
@click.option(
    "--rules",
    "rules_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Rules folder (default: daemon.rules_dir in the config).",
)
@click.option(
    "--observe", is_flag=True, help="Run every rule in observe mode (decide and audit, never act)."
)
@click.option(
    "--enforce",
    is_flag=True,
    help="Run every rule in enforce mode (act without approval; the guards still apply).",
)
@click.option("--log-level", type=click.Choice(["debug", "info", "warn", "error"]), default="info")
@reports_errors
def run(
    config_path: Path, rules_dir: Path | None, observe: bool, enforce: bool, log_level: str
) -> None:
    """Run the daemon: tail Connect's topics, match rules, decide, audit, remediate."""
    from offsetd.app import (  # faust is imported only there
        Wiring,
        build_app,
        prepare_internal_topics,
        run_worker,
    )
    from offsetd.connect.meta import ConnectorMetaCache
    from offsetd.metrics.instruments import DaemonMetrics, RemediationMetrics
    from offsetd.remediation.wiring import build_remediator
    from offsetd.rules import RuleSet
    from offsetd.rules.loading import load_rules
    from offsetd.scope import scope_of

    settings = load_settings(config_path)
    alias = settings.daemon_kafka_cluster()
    if alias not in settings.kafka_clusters:
        raise ConfigError(f"daemon.kafka_cluster {alias!r} is not in kafka_clusters")
    connect = {n: c for n, c in settings.connect_clusters.items() if c.kafka_cluster == alias}
    rules = load_rules(rules_dir or settings.daemon.rules_dir)
    if observe and enforce:
        raise ConfigError("--observe and --enforce exclude each other")
    if observe or enforce:
        mode = "observe" if observe else "enforce"
        rules = RuleSet(r.rule.model_copy(update={"mode": mode}) for r in rules.rules)
    logging.basicConfig(level=log_level.upper().replace("WARN", "WARNING"))
    wait_for_clusters(settings, alias)
    kafka = settings.kafka_clusters[alias]
    audit = AuditLog(kafka.client_config(), settings.daemon.audit_topic)
    audit.start()
    registry = CollectorRegistry()
    meta = ConnectorMetaCache({n: ConnectClient.for_cluster(c) for n, c in connect.items()})
    remediator = build_remediator(
        settings, alias, connect, audit, RemediationMetrics.create(registry), meta
    )
    wiring = Wiring(
        settings=settings,
        alias=alias,
        kafka=kafka,
        connect=connect,
        rules=rules,
        audit=audit,
        meta=meta,
        registry=registry,
        metrics=DaemonMetrics.create(registry),
        remediator=remediator,
    )
    for name, cluster in connect.items():  # offsetd.scope: what this deployment acts on
        owned = scope_of(settings.remediation, name, cluster).describe()
        logging.getLogger("offsetd").info("Connect cluster %s: acting on %s", name, owned)
    # Before faust subscribes: a topic it creates itself can be missing from the metadata its
    # group's first assignment uses, and the agent would hear nothing for five minutes.
    prepare_internal_topics(settings, alias)
    run_worker(build_app(wiring), log_level)
