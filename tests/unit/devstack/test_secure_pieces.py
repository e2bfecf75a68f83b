"""Pure parts of the secure stack: broker and worker settings, ACL bindings, the config it
writes for offsetd (its own principal, passwords as files)."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclOperation,
    ResourcePatternType,
    ResourceType,
)
from ruamel.yaml import YAML

from offsetd.config import load_settings
from offsetd.devstack import kafka, mm2
from offsetd.devstack.connect import WorkerGroup
from offsetd.devstack.security import OFFSETD_ACLS, STACK_ACLS, Acl, StackSecurity
from offsetd.devstack.stack import _security_info
from offsetd.devstack.tls import TlsMaterial
from tests.unit.devstack.stackinfo import secure_stack_info

PASSWORDS = {p: f'pw-{p}-"quoted"' for p in ("admin", "broker", "connect", "mm2", "offsetd")}


def security(tmp_path: Path) -> StackSecurity:
    tls = TlsMaterial(
        tmp_path / "ca.pem", tmp_path / "ca.p12", tmp_path / "server.p12", tmp_path / "t.p12", "s"
    )
    return StackSecurity(tls, PASSWORDS, {"admin": "ra", "offsetd": "ro"}, tmp_path)


def test_brokers_serve_sasl_ssl_only_and_deny_what_no_acl_allows(tmp_path: Path) -> None:
    node = kafka.KafkaNode("west", 9092, 9093, kafka.new_cluster_id(), tmp_path, security(tmp_path))
    props = node.properties()
    assert props["listeners"] == "SASL_SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert "PLAINTEXT://" not in str(props["listeners"])
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:broker;User:admin"
    # a JAAS option value is a quoted string: a password with quotes stays one value
    jaas = str(props["listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"])
    assert 'password="pw-broker-\\"quoted\\""' in jaas
    assert node.admin_config()["sasl.username"] == "admin"
    format_args = security(tmp_path).scram_format_args()
    assert format_args.count("--add-scram") == len(PASSWORDS)


def test_connect_serves_https_with_basic_auth_and_mm2_is_its_own_principal(
    tmp_path: Path,
) -> None:
    secure = security(tmp_path)
    group = WorkerGroup(bootstrap="127.0.0.1:9092", security=secure)
    worker = group.worker_properties(8083)
    assert worker["listeners"] == "https://127.0.0.1:8083"
    assert str(worker["rest.extension.classes"]).endswith("BasicAuthSecurityRestExtension")
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert worker[f"{prefix}security.protocol"] == "SASL_SSL"
        assert 'username="connect"' in str(worker[f"{prefix}sasl.jaas.config"])
    (option,) = group.jvm_options()
    jaas = Path(option.split("=", 1)[1])
    assert "PropertyFileLoginModule" in jaas.read_text()
    assert (tmp_path / "connect-rest-users.properties").read_text() == "admin: ra\noffsetd: ro\n"
    mirror = mm2.Mm2Set("127.0.0.1:1", "127.0.0.1:2", "/tmp/a", security=secure).source()
    for side in ("source", "target"):
        assert 'username="mm2"' in mirror[f"{side}.cluster.sasl.jaas.config"]


def test_acls_bind_to_users_and_offsetd_is_no_super_user() -> None:
    binding = Acl("offsetd", "topic", "offsetd", "ALL", prefixed=True).binding()
    assert binding.principal == "User:offsetd"
    assert binding.restype == ResourceType.TOPIC
    assert binding.resource_pattern_type == ResourcePatternType.PREFIXED
    assert binding.operation == AclOperation.ALL
    assert {a.principal for a in STACK_ACLS} == {"connect", "mm2", "offsetd"}
    # offsetd may do everything only under its own prefix, and nothing on the cluster
    assert not [a for a in OFFSETD_ACLS if a.operation == "ALL" and not a.prefixed]
    assert not [a for a in OFFSETD_ACLS if a.resource == "cluster"]


def test_the_written_config_uses_offsetds_principal_and_password_files(tmp_path: Path) -> None:
    secure = security(tmp_path)
    info = secure_stack_info(tmp_path, _security_info(secure))
    written = info.offsetd_config()
    assert PASSWORDS["offsetd"] not in str(written)  # by reference only
    assert (
        written["kafka_clusters"]["east"]["sasl"] is not written["kafka_clusters"]["west"]["sasl"]
    )
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(written, out)
    settings = load_settings(path, {})
    client = settings.kafka_clusters["west"].client_config()
    assert client["sasl.username"] == "offsetd"
    assert client["sasl.password"] == PASSWORDS["offsetd"]
    auth = settings.connect_clusters["local"].auth
    assert auth is not None
    assert auth.password.get_secret_value() == "ro"
    assert info.admin_config("west")["sasl.username"] == "admin"
