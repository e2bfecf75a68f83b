"""What every offsets command shares: the Connect cluster, the snapshot store, errors."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx

from offsetd.cli.failures import reports_errors
from offsetd.config import DEFAULT_CONFIG_PATH, Settings, load_settings
from offsetd.config.connect_clusters import StrimziAccess
from offsetd.connect.client import ConnectClient
from offsetd.errors import ConfigError
from offsetd.offsets.location import WorkerView, parse_properties, worker_view
from offsetd.offsets.snapshots import (
    FileSnapshotStore,
    KafkaSnapshotStore,
    SnapshotStore,
    default_file_store,
)

__all__ = ["F", "T", "Target", "connect_options", "reports_errors", "resolve_target", "run_async"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@dataclass
class Target:
    """The Connect cluster a command works on, and everything resolved around it."""

    settings: Settings | None
    name: str
    client: ConnectClient
    orchestrator: str
    worker: WorkerView
    store: SnapshotStore
    output: str
    strimzi: StrimziAccess | None = None  # Kubernetes access: config, or --strimzi-namespace


def connect_options(func: F) -> F:
    """Options to pick the Connect cluster (offsetd.yaml or a URL) and the output format."""
    options = [
        click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False, path_type=Path),
            envvar="OFFSETD_CONFIG",
            default=None,
            help=f"offsetd.yaml (default: ./{DEFAULT_CONFIG_PATH} if present).",
        ),
        click.option(
            "--connect-cluster",
            default=None,
            help="Connect cluster name in offsetd.yaml (default: the only one).",
        ),
        click.option(
            "--connect-url", default=None, help="Connect REST URL, instead of the config."
        ),
        click.option("--username", default=None, help="Basic auth user for --connect-url."),
        click.option(
            "--password",
            envvar="OFFSETD_CONNECT_PASSWORD",
            default=None,
            help="Basic auth password (better: $OFFSETD_CONNECT_PASSWORD).",
        ),
        click.option(
            "--ca-file",
            type=click.Path(exists=True, dir_okay=False),
            default=None,
            help="CA bundle for an https --connect-url.",
        ),
        click.option("--insecure", is_flag=True, help="Do not verify Connect's TLS certificate."),
        click.option(
            "--worker-config",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="The workers' worker.properties (topics, group, EOS).",
        ),
        click.option(
            "--snapshot-dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=None,
            help="Keep snapshots in this folder instead of Kafka.",
        ),
        click.option(
            "--strimzi-namespace",
            default=None,
            help="The namespace of the cluster's Strimzi resources: offsetd asks the Kubernetes "
            "API whether Strimzi manages the cluster and then changes connectors through them "
            "(with --connect-url, or over the config's strimzi.namespace).",
        ),
        click.option(
            "--kubeconfig",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="--strimzi-namespace: the kubeconfig (default: $KUBECONFIG, ~/.kube/config, "
            "then the pod's service account).",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice(["table", "json"]),
            default="table",
            show_default=True,
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def resolve_target(
    config_path: Path | None,
    connect_cluster: str | None,
    connect_url: str | None,
    username: str | None,
    password: str | None,
    ca_file: str | None,
    insecure: bool,
    worker_config: Path | None,
    snapshot_dir: Path | None,
    output: str,
    strimzi_namespace: str | None = None,
    kubeconfig: Path | None = None,
) -> Target:
    settings = _settings(config_path, required=connect_url is None)
    properties = parse_properties(worker_config.read_text()) if worker_config else {}
    if connect_url is not None:
        verify: Any = False if insecure else (ca_file or True)
        auth = httpx.BasicAuth(username, password or "") if username else None
        client = ConnectClient(
            httpx.AsyncClient(base_url=connect_url, auth=auth, verify=verify, timeout=95.0),
            user=username,
        )
        name, orchestrator = connect_url, "none"
        cluster_name = connect_cluster
    else:
        assert settings is not None
        cluster_name = _pick(settings, connect_cluster)
        cluster = settings.connect_clusters[cluster_name]
        client = ConnectClient.for_cluster(cluster)
        name, orchestrator = cluster_name, cluster.orchestrator
    worker = worker_view(settings, cluster_name, properties)
    configured = (
        settings.connect_clusters[cluster_name].strimzi
        if connect_url is None and settings is not None and cluster_name is not None
        else None
    )
    return Target(
        settings,
        name,
        client,
        orchestrator,
        worker,
        _store(settings, worker, snapshot_dir),
        output,
        _strimzi_access(configured, strimzi_namespace, kubeconfig),
    )


def _strimzi_access(
    configured: StrimziAccess | None, namespace: str | None, kubeconfig: Path | None
) -> StrimziAccess | None:
    """The config's `strimzi` section, with the command's flags over it."""
    if namespace is None and kubeconfig is None:
        return configured
    if namespace is None and configured is None:
        raise ConfigError("--kubeconfig needs --strimzi-namespace (or a strimzi section)")
    base = configured.model_dump() if configured is not None else {}
    if namespace is not None:
        base["namespace"] = namespace
    if kubeconfig is not None:
        base["kubeconfig"] = kubeconfig
    return StrimziAccess.model_validate(base)


def _settings(path: Path | None, *, required: bool) -> Settings | None:
    if path is None and Path(DEFAULT_CONFIG_PATH).exists():
        path = Path(DEFAULT_CONFIG_PATH)
    if path is None:
        if required:
            raise ConfigError(
                f"no {DEFAULT_CONFIG_PATH} here: pass --config, or --connect-url for a one-off"
            )
        return load_settings(None, environ=os.environ)
    return load_settings(path, environ=os.environ)


def _pick(settings: Settings, name: str | None) -> str:
    names = sorted(settings.connect_clusters)
    if name is not None:
        if name not in settings.connect_clusters:
            raise ConfigError(
                f"no Connect cluster {name!r} in the config (known: {', '.join(names)})"
            )
        return name
    if len(names) != 1:
        raise ConfigError(
            f"the config has {len(names)} Connect clusters ({', '.join(names) or 'none'}): "
            "choose one with --connect-cluster"
        )
    return names[0]


def _store(
    settings: Settings | None, worker: WorkerView, snapshot_dir: Path | None
) -> SnapshotStore:
    if snapshot_dir is not None:
        return FileSnapshotStore(snapshot_dir)
    if settings is not None:
        alias = settings.offsets.snapshots_kafka_cluster or (
            worker.cluster.alias if worker.cluster else None
        )
        if alias is not None and alias in settings.kafka_clusters:
            return KafkaSnapshotStore(
                settings.kafka_clusters[alias].client_config(), settings.offsets.snapshots_topic
            )
    return default_file_store()


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)
