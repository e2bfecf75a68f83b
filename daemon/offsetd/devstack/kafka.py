"""One single-node KRaft cluster (combined broker + controller) on loopback."""

from __future__ import annotations

import base64
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jvm import java_command, render_properties, write_log_config
from offsetd.devstack.oauth import OAuthLogin
from offsetd.devstack.ports import HOST
from offsetd.devstack.security import StackSecurity

__all__ = ["KafkaNode", "is_ready", "new_cluster_id", "prepare"]


def new_cluster_id() -> str:
    """A KRaft cluster id as Kafka's Uuid prints it: URL-safe base64 of 16 random bytes.

    Kafka never hands out ids starting with '-' (argparse would read them as options).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


@dataclass(frozen=True)
class KafkaNode:
    alias: str
    broker_port: int
    controller_port: int
    cluster_id: str
    data_dir: Path
    security: StackSecurity | None = None  # None: PLAINTEXT, no authorizer
    oauth: OAuthLogin | None = None  # `--login oauth`: an OAUTHBEARER listener on oauth_port
    oauth_port: int = 0

    @property
    def oauth_bootstrap(self) -> str:
        return f"{HOST}:{self.oauth_port}"

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.broker_port}"

    def admin_config(self) -> dict[str, str]:
        """librdkafka settings of the stack's own administrator (a super user when secure)."""
        conf = {"bootstrap.servers": self.bootstrap}
        if self.security is not None:
            conf.update(self.security.client_config("admin"))
        return conf

    def properties(self) -> dict[str, str | int]:
        """Settings for one node; every replication factor is 1, since there is one broker."""
        props = self._plain_properties()
        if self.security is not None:
            props.update(
                self.security.broker_properties(HOST, self.broker_port, self.controller_port)
            )
        if self.oauth is not None:
            props.update(self.oauth.broker_properties(props, HOST, self.oauth_port))
        return props

    def _plain_properties(self) -> dict[str, str | int]:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.broker_port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.broker_port},CONTROLLER://{HOST}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": 1,
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 5,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 5,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "share.coordinator.state.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0,
            "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
            "log.segment.bytes": 64 * 1024 * 1024,
        }


def prepare(
    node: KafkaNode, java: str, jar_dir: Path, config_dir: Path, logs_dir: Path
) -> list[str]:
    """Write the node's properties, format its storage, and return the broker's command line."""
    props_file = config_dir / f"{node.alias}.properties"
    props_file.write_text(render_properties(node.properties()))
    tool_log = write_log_config(config_dir, "tools", "warn")
    scram = node.security.scram_format_args() if node.security is not None else []
    fmt = java_command(
        java,
        jar_dir,
        "kafka.tools.StorageTool",
        ["format", "-t", node.cluster_id, "-c", str(props_file), *scram],
        log_config=tool_log,
        logs_dir=logs_dir,
        heap_mb=256,
    )
    result = subprocess.run(fmt, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise DevStackError(f"formatting the storage of {node.alias} failed: {detail[0]}")
    return java_command(
        java,
        jar_dir,
        "kafka.Kafka",
        [str(props_file)],
        log_config=write_log_config(config_dir, "broker", "info"),
        logs_dir=logs_dir,
        heap_mb=512,
        jvm_options=node.oauth.jvm_options() if node.oauth is not None else (),
    )


def is_ready(node: KafkaNode) -> bool:
    """The broker answers a metadata request, and with our cluster id (not a stranger's)."""
    admin = AdminClient({**node.admin_config(), "socket.timeout.ms": 2000, "log_level": 0})
    try:
        metadata = admin.list_topics(timeout=2)
    except KafkaException:
        return False
    return bool(metadata.brokers) and metadata.cluster_id == node.cluster_id
