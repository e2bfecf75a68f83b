"""`offsetd dev`: the embedded local stack (Kafka east + west, Connect, MirrorMaker 2)."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click
from ruamel.yaml import YAML

from offsetd.cli.devoptions import default_run_dir, run_dir_option
from offsetd.cli.devoptions import fail as _fail
from offsetd.cli.devoptions import say as _say
from offsetd.cli.history import HEADERS, incident_rows, incidents
from offsetd.cli.output import table
from offsetd.cli.spark_cluster import spark_cluster
from offsetd.devstack.demo import run_demo
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.image import ensure_image, write_oci_archive
from offsetd.devstack.spark_cluster import SparkCluster
from offsetd.devstack.stack import LOGINS, Stack, StackInfo

__all__ = ["default_run_dir", "demo", "dev", "down", "env", "image", "run_dir_option", "up"]


def _print_endpoints(info: StackInfo) -> None:
    for alias, cluster in info.clusters.items():
        click.echo(f"kafka {alias:<5} bootstrap.servers={cluster['bootstrap.servers']}")
    for alias, cluster in info.clusters.items():
        if "oauth.bootstrap.servers" in cluster:
            click.echo(f"oauth {alias:<5} bootstrap.servers={cluster['oauth.bootstrap.servers']}")
    if "oauth" in info.security:
        oauth = info.security["oauth"]
        click.echo(f"oidc          {oauth['issuer']} (client {oauth['client_id']})")
    for url in info.connect["urls"]:
        click.echo(f"connect       {url}")
    click.echo(f"mm2           {', '.join(info.mm2['connectors'])}")
    if info.kubernetes:
        kube = info.kubernetes
        click.echo(
            f"kubernetes    {kube['url']} namespace {kube['namespace']} "
            f"(kafka.strimzi.io/{kube['strimzi_api']}; stand-in operator every "
            f"{kube['standin_interval_s']:g} s)"
        )
        click.echo(f"kubeconfig    {kube['admin_kubeconfig']} (admin)")
        click.echo(f"kubeconfig    {kube['offsetd_kubeconfig']} (offsetd's Role)")
    click.echo(f"run dir       {info.run_dir} (started in {info.started_in_s} s)")


@click.group()
def dev() -> None:
    """Run the embedded local stack that offsetd's tests and demo use."""


@dev.command()
@run_dir_option
@click.option(
    "--detach", is_flag=True, help="Return once the stack is ready; stop it with `dev down`."
)
@click.option("--workers", default=1, show_default=True, help="Connect workers in the group.")
@click.option(
    "--base-port", type=int, default=None, help="Use ports from here on instead of free ones."
)
@click.option("--timeout", default=240.0, show_default=True, help="Seconds to wait for readiness.")
@click.option(
    "--k8s",
    "k8s",
    is_flag=True,
    help="Also start etcd + kube-apiserver with Strimzi's CRDs, resources describing the "
    "stack, and a stand-in for Strimzi's operator.",
)
@click.option(
    "--strimzi-crds",
    type=click.Choice(["1.2.0", "0.45.0"]),
    default="1.2.0",
    show_default=True,
    help="--k8s: Strimzi release of the CRDs (1.2.0 serves v1, 0.45.0 serves v1beta2).",
)
@click.option(
    "--reconcile-interval",
    type=float,
    default=120.0,
    show_default=True,
    help="--k8s: seconds between the stand-in operator's full reconciles.",
)
@click.option(
    "--secure",
    is_flag=True,
    help="SASL_SSL (SCRAM-SHA-512) brokers with ACLs, and Connect's REST API over HTTPS with "
    "basic auth; `dev env --write-config` writes offsetd's credentials as files.",
)
@click.option(
    "--login",
    type=click.Choice(LOGINS),
    default="scram",
    show_default=True,
    help="--secure: how offsetd logs in. mtls: client certificates of the stack's CA to Kafka "
    "and Connect's REST API (`dev env --write-config` writes offsetd's as files); oauth: "
    "OAUTHBEARER to Kafka with tokens of a local OIDC provider (Ory Hydra, built once from the "
    "Go module proxy; its token endpoint on HTTPS with the stack's CA, offsetd's oauth.ca_file), "
    "on a listener of its own.",
)
def up(
    run_dir: Path,
    detach: bool,
    workers: int,
    base_port: int | None,
    timeout: float,
    k8s: bool,
    strimzi_crds: str,
    reconcile_interval: float,
    secure: bool,
    login: str,
) -> None:
    """Start two KRaft clusters, a Connect worker group and the MM2 set on loopback."""
    stack = Stack(run_dir, log=_say)
    stopping = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    # Ctrl-C and SIGTERM stop the stack whatever this process inherited: a parent may have
    # left SIGINT ignored or blocked (both survive exec), and Python then never raises
    # KeyboardInterrupt; `stopping` also ends the wait should a library swallow it.
    stop_signals = {signal.SIGINT, signal.SIGTERM}
    previous = {sig: signal.signal(sig, on_signal) for sig in stop_signals}
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    try:
        info = stack.up(
            workers=workers,
            base_port=base_port,
            timeout_s=timeout,
            k8s=strimzi_crds if k8s else None,
            reconcile_interval_s=reconcile_interval,
            secure=secure,
            login=login,
        )
    except DevStackError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        _say("interrupted; everything started was stopped")
        sys.exit(130)
    _print_endpoints(info)
    if detach:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
        return
    _say("running; press Ctrl-C to stop")
    exit_code = 0
    try:
        while not stopping:
            dead = stack.dead_processes()
            if dead:
                _say(f"{', '.join(r.name for r in dead)} exited; see {dead[0].log}")
                exit_code = 1
                break
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        _say(f"stopping {', '.join(stack.down()) or 'nothing'}")
    sys.exit(exit_code)


@dev.command()
@click.option("--extras", default="", help="Comma-separated extras to include (spark).")
@click.option(
    "--archive",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the image as an oci-archive tarball (podman load -i FILE).",
)
def image(extras: str, archive: Path | None) -> None:
    """Build offsetd's OCI image without a registry (Debian's mmdebstrap and umoci, the wheel
    and its locked dependencies; needs root), cached by its inputs; print where it is."""
    try:
        info = ensure_image(tuple(e for e in extras.split(",") if e), log=_say)
        if archive is not None:
            write_oci_archive(info, archive)
    except DevStackError as exc:
        _fail(exc)
    click.echo(f"image         oci:{info.reference}")
    click.echo(
        f"size          {info.size_bytes / 1e6:.1f} MB compressed, "
        f"{info.uncompressed_bytes / 1e6:.1f} MB unpacked"
    )
    if archive is not None:
        click.echo(f"archive       {archive} (podman load -i {archive})")


@dev.command()
@run_dir_option
def down(run_dir: Path) -> None:
    """Stop exactly the processes `dev up` started (checked by PID and start time)."""
    # a Spark cluster started in this run dir (`dev spark-cluster up`) goes down with the stack
    stopped = [*SparkCluster.of_stack(run_dir).down(), *Stack(run_dir).down()]
    click.echo(f"stopped {', '.join(stopped)}" if stopped else "nothing was running")


@dev.command()
@run_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the endpoints as JSON.")
@click.option(
    "--write-config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write an offsetd.yaml for the running stack to this path.",
)
@click.option(
    "--strimzi",
    is_flag=True,
    help="--write-config on a --k8s stack: offsetd acts through the Strimzi resources.",
)
def env(run_dir: Path, as_json: bool, write_config: Path | None, strimzi: bool) -> None:
    """Describe the running stack: bootstrap servers, Connect URL, MM2 names."""
    try:
        info = Stack(run_dir).info()
    except DevStackError as exc:
        _fail(exc)
    if write_config is not None:
        try:
            _write_yaml(write_config, info.offsetd_config(strimzi=strimzi))
        except DevStackError as exc:
            _fail(exc)
        _say(f"wrote {write_config}")
    if as_json:
        click.echo(json.dumps(info.as_env(), indent=2))
    elif write_config is None:
        _print_endpoints(info)


def _write_yaml(path: Path, data: dict[str, Any]) -> None:
    yaml = YAML()
    yaml.default_flow_style = False
    with path.open("w") as out:
        out.write("# offsetd configuration for the local stack, written by `offsetd dev env`.\n")
        yaml.dump(data, out)


@dev.command()
@run_dir_option
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("offsetd.yaml"),
    show_default=True,
    help="Where to write the config for the stack and the daemon.",
)
@click.option(
    "--secure",
    is_flag=True,
    help="Start the secure stack if none runs (`dev up --secure`); the daemon runs as its own "
    "least-privilege principal.",
)
def demo(run_dir: Path, config_path: Path, secure: bool) -> None:
    """The main job: the daemon (enforce mode) healing a sink from a real poison record."""
    try:
        records = run_demo(Stack(run_dir, log=_say), config_path, _say, secure=secure)
    except DevStackError as exc:
        _fail(exc)
    click.echo("offsetd history (the demo connector: one row per action, newest first):")
    click.echo(table(HEADERS, incident_rows(reversed(incidents(records)))))
    click.echo(
        f"\nall decisions: .venv/bin/offsetd history --config {config_path}\n"
        "stop everything: make down"
    )


dev.add_command(spark_cluster)
