"""Bring the whole local stack up and down, and describe it to its users.

Start order: both brokers (formatted fresh each time), then the Connect workers on west, then the
MM2 set. Every process is recorded (PID + start time) the moment it starts, so a failure at any
point, or a later `down` after a crash, stops exactly what was started and nothing else.

Why one module of ~580 lines: `Stack` is the one list of started processes with their recorded
PIDs, and `up` and `down` walk it in opposite orders; each process's own launch and set-up lives
in its own module beside it (brokers, Connect, security, Strimzi, Spark).
"""

from __future__ import annotations

import copy
import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from offsetd.devstack import connect, kafka, mm2, mtls, oauth, procs, strimzi_resources
from offsetd.devstack.connect import ConnectRest
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import ensure_kafka_jars, java_executable
from offsetd.devstack.jvm import java_command, render_properties, write_log_config
from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.ports import HOST, check_bindable, free_ports
from offsetd.devstack.security import SASL_MECHANISM, StackSecurity, grant_acls, load_or_make
from offsetd.durations import format_duration

__all__ = ["CONNECT_CLUSTER_NAME", "LOGINS", "Stack", "StackInfo"]

CONNECT_CLUSTER_NAME = "local"
MM2_RESOURCE = "mm2"  # the KafkaMirrorMaker2 describing the MM2 set (`dev up --k8s`)
_PORTS_PER_KAFKA = 2
_OAUTH_PORTS = 4  # `--login oauth`: Hydra's public and admin ports, an OAUTH listener per broker
LOGINS = ("scram", mtls.LOGIN, "oauth")  # how the secure stack's principals log in (`--login`)


@dataclass
class StackInfo:
    """What a running stack is: written to `stack.json`, printed by `offsetd dev env`."""

    run_dir: str
    clusters: dict[str, dict[str, str]]
    connect: dict[str, Any]
    mm2: dict[str, Any]
    started_in_s: float = 0.0
    jar_dir: str = ""
    logs: dict[str, str] = field(default_factory=dict)
    kubernetes: dict[str, Any] = field(default_factory=dict)  # `dev up --k8s`: the API server
    # `dev up --secure`: the CA, the admin's and offsetd's credentials (see devstack.security)
    security: dict[str, Any] = field(default_factory=dict)

    def admin_config(self, alias: str) -> dict[str, str]:
        """librdkafka settings of the stack's administrator on cluster `alias`."""
        return {"bootstrap.servers": self.clusters[alias]["bootstrap.servers"]} | dict(
            self.security.get("admin_client", {})
        )

    def connect_rest(self, url: str | None = None, timeout_s: float = 10.0) -> ConnectRest:
        """The stack's own REST client of a worker (the admin user over HTTPS when secure)."""
        auth = self.security.get("rest_admin")
        cert = self.security.get("rest_admin_cert")  # the mTLS stack: a client certificate
        return ConnectRest(
            url or self.connect["url"],
            timeout_s,
            auth=(auth[0], auth[1]) if auth else None,
            ca_file=self.security.get("ca_pem"),
            cert=(cert[0], cert[1]) if cert else None,
        )

    def as_env(self) -> dict[str, Any]:
        return {
            "clusters": self.clusters,
            "connect": self.connect,
            "mm2": self.mm2,
            "run_dir": self.run_dir,
            "logs": self.logs,
            **({"kubernetes": self.kubernetes} if self.kubernetes else {}),
            **({"secure": True} if self.security else {}),
        }

    def offsetd_config(self, *, strimzi: bool = False) -> dict[str, Any]:
        """The `offsetd.yaml` content for this stack (plain data, validated by the config model).

        `strimzi`: (a `--k8s` stack) the Connect cluster gets its `strimzi` section, so offsetd
        drives its connectors through their resources with the `offsetd` service account.
        """
        config = self._plain_config()
        if strimzi:
            if not self.kubernetes:
                raise DevStackError("this stack has no Kubernetes API: start it with --k8s")
            config["connect_clusters"][CONNECT_CLUSTER_NAME]["strimzi"] = {
                "namespace": self.kubernetes["namespace"],
                "kafka_connect": CONNECT_CLUSTER_NAME,
                "kubeconfig": self.kubernetes["offsetd_kubeconfig"],
            }
        return config

    def _plain_config(self) -> dict[str, Any]:
        kafka_security: dict[str, Any] = {}
        connect_security: dict[str, Any] = {}
        if self.security.get("login") == mtls.LOGIN:
            kafka_security, connect_security = mtls.offsetd_config_sections(self.security)
        elif self.security:
            # offsetd's own principal; its passwords by reference to files in the run dir
            ca = self.security["ca_pem"]
            kafka_security = {
                "security_protocol": "SASL_SSL",
                "tls": {"ca_file": ca},
                "sasl": {
                    "mechanism": self.security["sasl_mechanism"],
                    "username": "offsetd",
                    "password": {"file": self.security["offsetd_kafka_password_file"]},
                },
            }
            if "oauth" in self.security:  # `--login oauth`: the OAuth client, on its listener
                kafka_security["sasl"] = oauth.offsetd_sasl(self.security["oauth"])
            connect_security = {
                "auth": {
                    "username": "offsetd",
                    "password": {"file": self.security["offsetd_rest_password_file"]},
                },
                "tls": {"ca_file": ca},
            }
        return {
            "kafka_clusters": {
                alias: {
                    "bootstrap_servers": c.get("oauth.bootstrap.servers", c["bootstrap.servers"]),
                    **copy.deepcopy(kafka_security),
                }
                for alias, c in self.clusters.items()
            },
            "connect_clusters": {
                CONNECT_CLUSTER_NAME: {
                    **connect_security,
                    "url": self.connect["url"],
                    "kafka_cluster": self.connect["kafka_cluster"],
                    "group_id": self.connect["group.id"],
                    "offsets_topic": self.connect["offset.storage.topic"],
                    "configs_topic": self.connect["config.storage.topic"],
                    "status_topic": self.connect["status.storage.topic"],
                    "dlq_topics": [],
                    "orchestrator": "none",
                }
            },
            # The lag statuses must know how often this stack's Connect writes N.
            "lag": {
                "flush_interval": format_duration(
                    int(self.connect.get("offset.flush.interval.ms", 60_000))
                ),
            },
        }


class Stack:
    """The local stack living in one run folder (config, data, logs, PIDs)."""

    def __init__(self, run_dir: Path, log: Callable[[str], None] = lambda _msg: None) -> None:
        self.run_dir = run_dir.resolve()
        self.log = log
        self._procs_file = self.run_dir / "processes.json"
        self._state_file = self.run_dir / "stack.json"
        self._records: list[procs.ProcessRecord] = []

    # -- queries -----------------------------------------------------------------------------

    def live_processes(self) -> list[procs.ProcessRecord]:
        return [r for r in procs.load(self._procs_file) if r.matches_live_process()]

    def info(self) -> StackInfo:
        if not self._state_file.exists() or not self.live_processes():
            raise DevStackError(
                f"no local stack is running in {self.run_dir}; start one with `offsetd dev up`"
            )
        return StackInfo(**json.loads(self._state_file.read_text()))

    def dead_processes(self) -> list[procs.ProcessRecord]:
        return [r for r in procs.load(self._procs_file) if procs.exited(r)]

    # -- lifecycle ---------------------------------------------------------------------------

    def up(
        self,
        workers: int = 1,
        base_port: int | None = None,
        timeout_s: float = 180,
        *,
        k8s: str | None = None,
        reconcile_interval_s: float = 120.0,
        secure: bool = False,
        login: str = "scram",
    ) -> StackInfo:
        """Start the stack; `k8s` (a Strimzi release of the CRDs, e.g. "1.2.0") also starts
        a Kubernetes API server describing it, and the stand-in operator. `secure`: SASL_SSL
        brokers with ACLs and HTTPS + basic-auth Connect (`devstack.security`); with `login`
        "mtls" client certificates instead of passwords (`devstack.mtls`); with "oauth" offsetd
        logs in with OAUTHBEARER through the stack's own OIDC provider, on a listener of its own
        (`devstack.oauth`)."""
        if workers < 1:
            raise DevStackError("--workers must be at least 1")
        if login not in LOGINS:
            raise DevStackError(f"--login must be one of {', '.join(LOGINS)}, not {login!r}")
        if login != "scram" and not secure:
            raise DevStackError(f"--login {login} needs --secure")
        if secure and k8s is not None:
            # the stand-in operator speaks plain HTTP to Connect
            raise DevStackError("--secure and --k8s cannot be combined yet")
        if self.live_processes():
            raise DevStackError(
                f"a local stack is already running in {self.run_dir}; "
                "stop it with `offsetd dev down`"
            )
        started = time.monotonic()
        java = java_executable()
        jar_dir = ensure_kafka_jars()
        self._fresh_run_dir()
        extra = _OAUTH_PORTS if login == "oauth" else 0
        ports = self._ports(2 * _PORTS_PER_KAFKA + workers + extra, base_port)
        ports, oauth_ports = ports[: len(ports) - extra], ports[len(ports) - extra :]
        security: StackSecurity | None = None
        if secure:
            self.log("making the secure stack's CA, certificates and passwords")
            if login == mtls.LOGIN:
                security = mtls.load_or_make(java, self.run_dir / "security-mtls")
            else:
                security = load_or_make(java, self.run_dir / "security")
        deadline = time.monotonic() + timeout_s
        try:
            login_setup = (
                oauth.start_provider(
                    self.run_dir,
                    oauth_ports,
                    security.tls,  # Hydra's certificate is the stack CA's
                    self._spawn,
                    lambda what, record, ready: self._wait(what, record, deadline, ready),
                    self.log,
                )
                if oauth_ports and security is not None
                else None
            )
            info = self._start(java, jar_dir, ports, workers, deadline, security, login_setup)
            if k8s is not None:
                info.kubernetes = self._start_k8s(info, k8s, reconcile_interval_s)
        except BaseException:
            self.log("start-up failed; stopping the processes it started")
            _stop_in_order(self._records)
            self._state_file.unlink(missing_ok=True)
            raise
        info.started_in_s = round(time.monotonic() - started, 1)
        self._state_file.write_text(json.dumps(info.__dict__, indent=2))
        self._state_file.chmod(0o600)  # a secure stack's admin credentials are in it
        return info

    def spawn_extra(self, name: str, argv: list[str]) -> procs.ProcessRecord:
        """Start a process that belongs to this stack (e.g. the demo's daemon): `down` stops it.

        One of the same name that still runs is stopped first, so a second demo restarts it.
        """
        self._records = procs.load(self._procs_file)
        procs.stop([r for r in self._records if r.name == name])
        self._records = [r for r in self._records if r.name != name]
        return self._spawn(name, argv)

    def stop_extra(self, name: str) -> list[str]:
        records = procs.load(self._procs_file)
        stopped = procs.stop([r for r in records if r.name == name])
        procs.save([r for r in records if r.name != name], self._procs_file)
        return stopped

    def down(self) -> list[str]:
        """Stop exactly the recorded processes that are still ours; safe to call twice."""
        stopped = _stop_in_order(procs.load(self._procs_file))
        stopped += KubeCluster(self.run_dir / "k8s").down()
        self._procs_file.unlink(missing_ok=True)
        self._state_file.unlink(missing_ok=True)
        return stopped

    # -- internals ---------------------------------------------------------------------------

    def _fresh_run_dir(self) -> None:
        for sub in ("data", "config", "logs"):
            shutil.rmtree(self.run_dir / sub, ignore_errors=True)
            (self.run_dir / sub).mkdir(parents=True)
        self._procs_file.unlink(missing_ok=True)
        self._state_file.unlink(missing_ok=True)

    @staticmethod
    def _ports(count: int, base_port: int | None) -> list[int]:
        if base_port is None:
            return free_ports(count)
        ports = list(range(base_port, base_port + count))
        check_bindable(ports)
        return ports

    def _spawn(self, name: str, argv: list[str]) -> procs.ProcessRecord:
        record = procs.spawn(name, argv, self.run_dir / "logs" / f"{name}.log", self.run_dir)
        self._records.append(record)
        procs.save(self._records, self._procs_file)
        return record

    def _start(
        self,
        java: str,
        jar_dir: Path,
        ports: list[int],
        workers: int,
        deadline: float,
        security: StackSecurity | None = None,
        login: oauth.OAuthLogin | None = None,
    ) -> StackInfo:
        config_dir, logs_dir = self.run_dir / "config", self.run_dir / "logs"
        nodes = {
            alias: kafka.KafkaNode(
                alias,
                broker_port=ports[2 * i],
                controller_port=ports[2 * i + 1],
                cluster_id=kafka.new_cluster_id(),
                data_dir=self.run_dir / "data" / alias,
                security=security,
                oauth=login,
                oauth_port=login.listener_ports[i] if login is not None else 0,
            )
            for i, alias in enumerate((mm2.SOURCE, mm2.TARGET))
        }
        broker_records = {}
        for alias, node in nodes.items():
            self.log(f"formatting and starting Kafka cluster {alias} on {node.bootstrap}")
            argv = kafka.prepare(node, java, jar_dir, config_dir, logs_dir)
            broker_records[alias] = self._spawn(f"kafka-{alias}", argv)
        for alias, node in nodes.items():
            self._wait(
                f"Kafka cluster {alias}",
                broker_records[alias],
                deadline,
                partial(kafka.is_ready, node),
            )

        if security is not None:
            for node in nodes.values():
                self.log(f"granting the ACLs on {node.alias}")
                grant_acls(
                    node.admin_config(), security.stack_acls() + (login.acls() if login else [])
                )

        west = nodes[mm2.TARGET]
        group = connect.WorkerGroup(bootstrap=west.bootstrap, security=security)
        urls = []
        worker_records = []
        log_config = write_log_config(config_dir, "connect", "info")
        for index, port in enumerate(ports[2 * _PORTS_PER_KAFKA :], start=1):
            props = config_dir / f"connect-worker-{index}.properties"
            props.write_text(render_properties(group.worker_properties(port)))
            argv = java_command(
                java,
                jar_dir,
                "org.apache.kafka.connect.cli.ConnectDistributed",
                [str(props)],
                log_config=log_config,
                logs_dir=logs_dir,
                heap_mb=768,
                jvm_options=group.jvm_options(),
            )
            url = f"{group.scheme}://{HOST}:{port}"
            self.log(f"starting Connect worker {index} on {url}")
            worker_records.append(self._spawn(f"connect-{index}", argv))
            urls.append(url)
        described = _security_info(security) if security is not None else {}
        if login is not None:
            described["oauth"] = login.describe()
        rest_args = security.rest_client_args() if security is not None else {}
        rests = [connect.ConnectRest(url, **rest_args) for url in urls]
        try:
            for record, rest in zip(worker_records, rests, strict=True):
                self._wait(
                    f"Connect worker {rest.url}",
                    record,
                    deadline,
                    partial(connect.is_ready, rest, west.cluster_id),
                )
            self._start_mm2(rests[0], nodes, worker_records, deadline, security)
        finally:
            for rest in rests:
                rest.close()

        return StackInfo(
            run_dir=str(self.run_dir),
            clusters={
                alias: {"bootstrap.servers": n.bootstrap, "cluster.id": n.cluster_id}
                | ({"oauth.bootstrap.servers": n.oauth_bootstrap} if n.oauth else {})
                for alias, n in nodes.items()
            },
            connect={
                "url": urls[0],
                "urls": urls,
                "name": CONNECT_CLUSTER_NAME,
                "kafka_cluster": mm2.TARGET,
                "group.id": group.group_id,
                "offset.storage.topic": group.offsets_topic,
                "config.storage.topic": group.configs_topic,
                "status.storage.topic": group.status_topic,
                "offset.flush.interval.ms": group.flush_interval_ms,
            },
            mm2={
                "source": mm2.SOURCE,
                "target": mm2.TARGET,
                "connectors": [
                    mm2.SOURCE_CONNECTOR,
                    mm2.CHECKPOINT_CONNECTOR,
                    mm2.HEARTBEAT_CONNECTOR,
                ],
                "heartbeats_topic": mm2.HEARTBEATS_TOPIC,
                "consumer_group": {
                    "name": mm2.AUDIT_GROUP,
                    "cluster": mm2.SOURCE,
                    "connector": mm2.AUDIT_CONNECTOR,
                },
            },
            jar_dir=str(jar_dir),
            logs={r.name: r.log for r in self._records},
            security=described,
        )

    def _start_k8s(self, info: StackInfo, release: str, interval_s: float) -> dict[str, Any]:
        """The API server, resources describing this stack, and the stand-in operator."""
        cluster = KubeCluster(self.run_dir / "k8s", log=self.log)
        kube = cluster.up(free_ports(3), strimzi_release=release)
        self._records += procs.load(cluster.run_dir / "processes.json")  # so a failure stops them
        rest = info.connect_rest()
        client = cluster.admin_client()
        try:
            for doc in _stack_resources(info, rest, kube.strimzi_api):
                strimzi_resources.apply_resource(client, kube.namespace, doc)
        finally:
            client.close()
            rest.close()
        self._records = [r for r in self._records if r.name not in ("etcd", "kube-apiserver")]
        url = info.connect["url"]
        self.log(f"starting the Strimzi stand-in operator (every {interval_s:g} s)")
        self._spawn(
            "strimzi-standin",
            [
                sys.executable,
                "-m",
                "offsetd.devstack.strimzi_standin",
                f"--kubeconfig={kube.admin_kubeconfig}",
                f"--namespace={kube.namespace}",
                f"--connect={CONNECT_CLUSTER_NAME}={url}",
                f"--connect={MM2_RESOURCE}={url}",
                f"--interval={interval_s}",
            ],
        )
        return {**asdict(kube), "standin_interval_s": interval_s}

    def _start_mm2(
        self,
        rest: connect.ConnectRest,
        nodes: dict[str, kafka.KafkaNode],
        workers: list[procs.ProcessRecord],
        deadline: float,
        security: StackSecurity | None = None,
    ) -> None:
        mirror = mm2.Mm2Set(
            east_bootstrap=nodes[mm2.SOURCE].bootstrap,
            west_bootstrap=nodes[mm2.TARGET].bootstrap,
            audit_file=str(self.run_dir / "data" / "heartbeat-audit.txt"),
            security=security,
        )
        self.log("creating the MirrorMaker 2 set")
        rest.put_config(mm2.HEARTBEAT_CONNECTOR, mirror.heartbeat())
        east_admin = AdminClient({**nodes[mm2.SOURCE].admin_config(), "log_level": 0})
        # The audit group must not subscribe before the heartbeat connector created the topic.
        self._wait(
            "the heartbeats topic on east",
            workers[0],
            deadline,
            lambda: mm2.HEARTBEATS_TOPIC in east_admin.list_topics(timeout=5).topics,
        )
        rest.put_config(mm2.SOURCE_CONNECTOR, mirror.source())
        rest.put_config(mm2.CHECKPOINT_CONNECTOR, mirror.checkpoint())
        rest.put_config(mm2.AUDIT_CONNECTOR, mirror.audit_sink())
        for name in (
            mm2.HEARTBEAT_CONNECTOR,
            mm2.SOURCE_CONNECTOR,
            mm2.AUDIT_CONNECTOR,
            mm2.CHECKPOINT_CONNECTOR,
        ):
            self._wait(
                f"connector {name}",
                workers[0],
                deadline,
                partial(self._connector_running, rest, name),
            )

    @staticmethod
    def _connector_running(rest: connect.ConnectRest, name: str) -> bool:
        status = rest.status(name)
        problem = connect.failure(status)
        if problem:
            raise DevStackError(f"connector {name} failed while starting: {problem}")
        return connect.running(status, min_tasks=1)

    def _wait(
        self, what: str, record: procs.ProcessRecord, deadline: float, ready: Callable[[], bool]
    ) -> None:
        """Poll `ready` until it holds; fail fast if the process died, or at the deadline."""
        while True:
            if procs.exited(record):
                raise DevStackError(_death_message(what, record))
            try:
                if ready():
                    return
            except DevStackError:
                raise
            except Exception:  # noqa: S110 - not ready yet; the deadline bounds the loop
                pass
            if time.monotonic() > deadline:
                raise DevStackError(
                    f"{what} was not ready in time; see {record.log} for what it was doing"
                )
            time.sleep(0.5)


def _security_info(security: StackSecurity) -> dict[str, Any]:
    """What `StackInfo.security` holds: offsetd's passwords as files (`{file: ...}` in the
    config `dev env` writes), the admin's credentials for the stack and its tests."""
    if isinstance(security, mtls.MtlsSecurity):
        return security.describe()
    folder = security.folder
    kafka_password = folder / "offsetd-kafka-password"
    rest_password = folder / "offsetd-rest-password"
    for path, value in (
        (kafka_password, security.passwords["offsetd"]),
        (rest_password, security.rest_passwords["offsetd"]),
    ):
        path.write_text(value + "\n")
        path.chmod(0o600)
    return {
        "ca_pem": str(security.tls.ca_pem),
        "sasl_mechanism": SASL_MECHANISM,
        "offsetd_kafka_password_file": str(kafka_password),
        "offsetd_rest_password_file": str(rest_password),
        "admin_client": security.client_config("admin"),
        "rest_admin": list(security.rest_auth()),
        "folder": str(folder),
    }


def _stack_resources(
    info: StackInfo, rest: connect.ConnectRest, version: str
) -> list[dict[str, Any]]:
    topics = {
        "config": info.connect["config.storage.topic"],
        "status": info.connect["status.storage.topic"],
        "offset": info.connect["offset.storage.topic"],
        "group": info.connect["group.id"],
    }
    west = info.clusters[mm2.TARGET]["bootstrap.servers"]
    east = info.clusters[mm2.SOURCE]["bootstrap.servers"]
    docs = [
        strimzi_resources.kafka_connect(
            CONNECT_CLUSTER_NAME, version, bootstrap=west, group_id=topics["group"], topics=topics
        ),
        strimzi_resources.kafka_mirror_maker_2(
            MM2_RESOURCE,
            version,
            source=(mm2.SOURCE, east),
            target=(mm2.TARGET, west),
            target_topics=topics,
            source_config=rest.config(mm2.SOURCE_CONNECTOR),
            checkpoint_config=rest.config(mm2.CHECKPOINT_CONNECTOR),
        ),
    ]
    for name in (mm2.AUDIT_CONNECTOR,):  # west->east.Mirror... is no valid resource name
        docs.append(
            strimzi_resources.kafka_connector(
                name, version, CONNECT_CLUSTER_NAME, rest.config(name)
            )
        )
    return docs


def _stop_in_order(records: list[procs.ProcessRecord]) -> list[str]:
    """Clients first (the demo's daemon), then Connect workers while their brokers still
    answer, so they leave their groups cleanly, then the brokers."""
    extras = [r for r in records if not r.name.startswith(("connect-", "kafka-"))]
    workers = [r for r in records if r.name.startswith("connect-")]
    brokers = [r for r in records if r.name.startswith("kafka-")]
    return procs.stop(extras) + procs.stop(workers) + procs.stop(brokers)


def _death_message(what: str, record: procs.ProcessRecord) -> str:
    text = Path(record.log).read_text(errors="replace") if Path(record.log).exists() else ""
    if "Address already in use" in text or "BindException" in text:
        return (
            f"{what} could not bind its port (address already in use); "
            "stop what holds it or choose another --base-port"
        )
    last = next(
        (ln for ln in reversed(text.splitlines()) if "ERROR" in ln or "Exception" in ln), ""
    )
    return f"{what} exited during start-up; see {record.log}" + (
        f" ({last.strip()[:200]})" if last else ""
    )
