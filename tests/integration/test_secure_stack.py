"""The secure local stack is secure, and offsetd works on it with its own principal.

`offsetd dev up --secure`: SASL_SSL (SCRAM-SHA-512) brokers whose authorizer denies what no ACL
allows, Connect's REST API over HTTPS with basic auth, MM2 replicating between them. These tests
first show the doors are shut (anonymous, plaintext, wrong password, no REST credentials), then
run offsetd's commands with the configuration `offsetd dev env --write-config` writes: offsetd's
principal, its passwords in files.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from offsetd.devstack import mm2
from offsetd.devstack.stack import StackInfo
from tests.integration.demo_checks import assert_healed
from tests.integration.lagutil import OFFSETD

pytestmark = pytest.mark.integration


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(OFFSETD), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _metadata_error(conf: dict[str, Any]) -> str:
    """What a metadata request reports, with the client's error callbacks (where librdkafka
    says why a connection failed): "" when it succeeds."""
    reported: list[str] = []
    admin = AdminClient(
        {
            **conf,
            "log_level": 0,
            "socket.timeout.ms": 3000,
            "error_cb": lambda e: reported.append(str(e)),  # type: ignore[dict-item]
        }
    )
    try:
        admin.list_topics(timeout=5)
    except KafkaException as exc:
        admin.poll(0.5)
        return "; ".join([str(exc.args[0]), *reported])
    return ""


# -- the doors are shut -------------------------------------------------------------------------


def test_a_plaintext_or_anonymous_client_gets_nothing(secure_stack: StackInfo) -> None:
    west = secure_stack.clusters["west"]["bootstrap.servers"]
    assert _metadata_error({"bootstrap.servers": west})  # PLAINTEXT against SASL_SSL
    wrong = {**secure_stack.admin_config("west"), "sasl.password": "not-the-password"}
    assert "Authentication failed" in _metadata_error(wrong)
    assert _metadata_error(secure_stack.admin_config("west")) == ""


def test_connect_wants_https_and_a_password(secure_stack: StackInfo) -> None:
    url = secure_stack.connect["url"]
    assert url.startswith("https://")
    ca = ssl.create_default_context(cafile=secure_stack.security["ca_pem"])
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://"), timeout=5)
    assert httpx.get(url, verify=ca, timeout=5).status_code == 401
    offsetd_password = Path(secure_stack.security["offsetd_rest_password_file"]).read_text()
    answer = httpx.get(url, verify=ca, auth=("offsetd", offsetd_password.strip()), timeout=5)
    assert answer.status_code == 200
    assert answer.json()["kafka_cluster_id"] == secure_stack.clusters["west"]["cluster.id"]


def test_offsetd_is_no_super_user(secure_stack: StackInfo, secure_yaml: Path) -> None:
    """The authorizer is on: offsetd's principal cannot read a topic outside its ACLs' reach
    for writing, nor create one outside its prefix."""
    conf = {
        "bootstrap.servers": secure_stack.clusters["west"]["bootstrap.servers"],
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "offsetd",
        "sasl.password": Path(secure_stack.security["offsetd_kafka_password_file"])
        .read_text()
        .strip(),
        "ssl.ca.location": secure_stack.security["ca_pem"],
    }
    admin = AdminClient(conf)
    future = admin.create_topics([NewTopic("not-offsetds-topic", 1, 1)])["not-offsetds-topic"]
    with pytest.raises(KafkaException, match=r"TOPIC_AUTHORIZATION_FAILED|not authorized"):
        future.result(timeout=30)


# -- MM2 and offsetd on it ----------------------------------------------------------------------


def test_mm2_replicates_on_the_secure_stack(secure_stack: StackInfo) -> None:
    west = secure_stack.admin_config("west")
    consumer = Consumer({**west, "group.id": "secure-test-reader", "enable.auto.commit": False})
    try:
        tp = TopicPartition(f"{mm2.SOURCE}.{mm2.HEARTBEATS_TOPIC}", 0)
        first = consumer.get_watermark_offsets(tp, timeout=10)[1]
        deadline = time.monotonic() + 30
        while consumer.get_watermark_offsets(tp, timeout=10)[1] <= first:
            assert time.monotonic() < deadline, "no heartbeat replicated in 30 s"
            time.sleep(1)
    finally:
        consumer.close()


def test_the_lag_one_shot_with_offsetds_principal(secure_yaml: Path) -> None:
    done = _run("lag", "--config", str(secure_yaml), "-o", "json")
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert not doc["errors"], doc["errors"]
    assert {p["topic"] for p in doc["partitions"]} >= {mm2.HEARTBEATS_TOPIC}
    assert doc["checkpoints"], "the checkpoint connector's groups are readable"


def test_offsets_list_over_https_with_basic_auth(secure_yaml: Path) -> None:
    done = _run("offsets", "list", mm2.AUDIT_CONNECTOR, "--config", str(secure_yaml), "-o", "json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed, done.stdout


# -- the main job: the daemon heals a poison record as offsetd's principal ----------------------


def _secrets(stack: StackInfo) -> list[str]:
    folder = Path(stack.security["folder"])
    saved = json.loads((folder / "passwords.json").read_text())
    store = (folder / "tls" / "store-password").read_text().strip()
    return [*saved["passwords"].values(), *saved["rest_passwords"].values(), store]


def test_the_demo_heals_a_poison_record_on_the_secure_stack(
    secure_stack: StackInfo, tmp_path: Path
) -> None:
    """`offsetd dev demo --secure`: ingest, the skip saga, quarantine and audit, with offsetd's
    principal and its ACLs only; its config names password files; nothing it wrote or said
    holds a password."""
    from offsetd.devstack.demo import run_demo
    from offsetd.devstack.stack import Stack

    local = Stack(Path(secure_stack.run_dir))
    said: list[str] = []
    config = tmp_path / "offsetd.yaml"
    try:
        records = run_demo(local, config, said.append, secure=True)
        metrics = httpx.get(
            f"http://127.0.0.1:{_web_port(config)}/metrics", timeout=10
        ).text  # fmt: skip
    finally:
        assert local.stop_extra("offsetd-run") == ["offsetd-run"]
    assert_healed(records, said)
    assert "offsetd_" in metrics  # the daemon served its page

    texts = {
        "config": config.read_text(),
        "said": "\n".join(said),
        "audit": json.dumps(records),
        "metrics": metrics,
        "daemon log": Path(secure_stack.run_dir, "logs", "offsetd-run.log").read_text(),
    }
    for secret in _secrets(secure_stack):
        assert not [name for name, text in texts.items() if secret in text]


def _web_port(config: Path) -> int:
    from ruamel.yaml import YAML

    return int(YAML(typ="safe").load(config.read_text())["daemon"]["web_port"])
