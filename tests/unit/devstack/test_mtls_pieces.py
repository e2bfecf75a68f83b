"""Pure parts of the mTLS stack: broker and worker settings, the principals' ACLs, the config
`dev env --write-config` writes (certificate and key files, no password), and how a refused
client certificate reads (librdkafka's and Python's words as they came from the real stack)."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from offsetd.config import load_settings
from offsetd.connect.transport import transport_error
from offsetd.devstack import kafka, mm2
from offsetd.devstack.connect import WorkerGroup
from offsetd.devstack.mtls import ClientCert, MtlsSecurity, offsetd_acls
from offsetd.devstack.security import OFFSETD_ACLS
from offsetd.devstack.stack import _security_info
from offsetd.devstack.tls import TlsMaterial
from offsetd.errors import TlsFailed
from offsetd.kafkaaccess import principal
from offsetd.kafkalogin import describe, login_failure
from tests.unit.devstack.stackinfo import secure_stack_info

NAMES = ("admin", "broker", "connect", "mm2", "offsetd")


def security(tmp_path: Path) -> MtlsSecurity:
    tls = TlsMaterial(
        tmp_path / "ca.pem", tmp_path / "ca.p12", tmp_path / "server.p12", tmp_path / "t.p12", "s"
    )
    certs = {
        n: ClientCert(n, tmp_path / f"{n}.p12", tmp_path / f"{n}.crt", tmp_path / f"{n}-key.pem")
        for n in NAMES
    }
    return MtlsSecurity(tls, {}, {}, tmp_path, certs)


def test_brokers_serve_ssl_requiring_a_certificate_and_principals_are_subjects(
    tmp_path: Path,
) -> None:
    node = kafka.KafkaNode("west", 9092, 9093, kafka.new_cluster_id(), tmp_path, security(tmp_path))
    props = node.properties()
    assert props["listeners"] == "SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["listener.security.protocol.map"] == "CONTROLLER:SSL,SSL:SSL"
    assert props["ssl.client.auth"] == "required"
    assert props["ssl.keystore.location"] == str(tmp_path / "broker.p12")
    assert props["super.users"] == "User:CN=broker;User:CN=admin"
    assert "ssl.principal.mapping.rules" not in props  # Kafka's DEFAULT, as Strimzi leaves it
    assert not any("sasl" in key for key in props)
    assert node.security is not None
    assert node.security.scram_format_args() == []


def test_offsetd_gets_the_least_privilege_acls_on_its_certificate_principal(
    tmp_path: Path,
) -> None:
    acls = security(tmp_path).stack_acls()
    mine = [a for a in acls if a.principal == "CN=offsetd"]
    assert mine == offsetd_acls()
    assert [(a.resource, a.name, a.operation) for a in mine] == [
        (a.resource, a.name, a.operation) for a in OFFSETD_ACLS
    ]
    assert mine[0].binding().principal == "User:CN=offsetd"
    assert {a.principal for a in acls} == {"CN=connect", "CN=mm2", "CN=offsetd"}


def test_connect_requires_a_client_certificate_and_needs_no_jaas(tmp_path: Path) -> None:
    group = WorkerGroup("127.0.0.1:9092", security=security(tmp_path))
    props = group.worker_properties(8083)
    assert props["listeners"] == "https://127.0.0.1:8083"
    assert props["ssl.client.auth"] == "required"
    assert "rest.extension.classes" not in props  # no basic auth: the certificate is the login
    for prefix in ("", "producer.", "consumer.", "admin."):
        assert props[f"{prefix}security.protocol"] == "SSL"
        assert props[f"{prefix}ssl.keystore.location"] == str(tmp_path / "connect.p12")
    assert group.jvm_options() == ()
    mirror = mm2.Mm2Set("e:1", "w:2", "/a", security=security(tmp_path))
    source = mirror.source()
    assert source["source.cluster.ssl.keystore.location"] == str(tmp_path / "mm2.p12")
    assert source["target.cluster.security.protocol"] == "SSL"


def test_the_written_config_names_certificate_files_and_no_password(tmp_path: Path) -> None:
    secure = security(tmp_path)
    info = secure_stack_info(tmp_path, _security_info(secure))
    written = info.offsetd_config()
    assert "password" not in str(written).lower()
    assert "sasl" not in str(written)
    assert written["kafka_clusters"]["east"]["tls"] is not written["kafka_clusters"]["west"]["tls"]
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(written, out)
    settings = load_settings(path, {})
    client = settings.kafka_clusters["west"].client_config()
    assert client["security.protocol"] == "SSL"
    assert client["ssl.certificate.location"] == str(tmp_path / "offsetd.crt")
    assert client["ssl.key.location"] == str(tmp_path / "offsetd-key.pem")
    assert client["ssl.ca.location"] == str(tmp_path / "ca.pem")
    connect = settings.connect_clusters["local"]
    assert connect.auth is None
    assert connect.tls is not None
    assert connect.tls.cert_file == tmp_path / "offsetd.crt"
    assert connect.tls.key_file == tmp_path / "offsetd-key.pem"
    assert info.admin_config("west")["ssl.certificate.location"] == str(tmp_path / "admin.crt")
    assert info.security["rest_admin_cert"] == [
        str(tmp_path / "admin.crt"),
        str(tmp_path / "admin-key.pem"),
    ]


# librdkafka 2.x against the mTLS stack: the broker's alert after the client's handshake
REFUSED = (
    "ssl://127.0.0.1:46773/bootstrap: Receive failed: error:0A000412:SSL routines::ssl/tls "
    "alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY)"
)


def test_a_refused_client_certificate_is_tls_failed_naming_the_file() -> None:
    conf = {
        "bootstrap.servers": "127.0.0.1:46773",
        "ssl.ca.location": "/ca.pem",
        "ssl.certificate.location": "/etc/offsetd/tls.crt",
        "ssl.key.location": "/etc/offsetd/tls.key",
    }
    found = login_failure("_TRANSPORT", REFUSED, conf, describe(conf, "west"))
    assert isinstance(found, TlsFailed)
    assert str(found) == (
        "Kafka cluster west (127.0.0.1:46773) refused the client certificate "
        "/etc/offsetd/tls.crt (tls.cert_file; is it signed by a CA the brokers trust?): "
        "ssl/tls alert bad certificate: SSL alert number 42"
    )
    anonymous = {k: v for k, v in conf.items() if "ssl.certificate" not in k}
    missing = login_failure("_TRANSPORT", REFUSED, anonymous, describe(conf, "west"))
    assert isinstance(missing, TlsFailed)
    assert "requires a client certificate, and none is configured" in str(missing)


def test_other_transport_failures_are_not_login_failures() -> None:
    conf = {"bootstrap.servers": "127.0.0.1:1"}
    refused = "ssl://127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    assert login_failure("_TRANSPORT", refused, conf, "x") is None


def test_connect_refusing_the_certificate_is_tls_failed() -> None:
    import ssl

    import httpx

    alert = ssl.SSLError(
        1, "[SSL: SSLV3_ALERT_CERTIFICATE_UNKNOWN] sslv3 alert certificate unknown"
    )
    alert.reason = "SSLV3_ALERT_CERTIFICATE_UNKNOWN"
    wrapped = httpx.ReadError("SSLV3_ALERT_CERTIFICATE_UNKNOWN")
    wrapped.__cause__ = alert
    error = transport_error(wrapped, "reach Connect", "https://c:8083")
    assert isinstance(error, TlsFailed)
    assert str(error) == (
        "could not reach Connect: Connect at https://c:8083 refused the client certificate "
        "(tls.cert_file; missing or not signed by a CA it trusts): "
        "SSLV3_ALERT_CERTIFICATE_UNKNOWN"
    )


# subject O=acme, CN=offsetd-unit (openssl req -x509 -subj "/O=acme/CN=offsetd-unit")
UNIT_CERT = """\
-----BEGIN CERTIFICATE-----
MIICKjCCAZOgAwIBAgIUEZ010vKhgyuPHFiSPypHoaq1TlQwDQYJKoZIhvcNAQEL
BQAwJjENMAsGA1UECgwEYWNtZTEVMBMGA1UEAwwMb2Zmc2V0ZC11bml0MCAXDTI2
MTEyODA3NDYyNFoYDzIxMjYxMTA0MDc0NjI0WjAmMQ0wCwYDVQQKDARhY21lMRUw
EwYDVQQDDAxvZmZzZXRkLXVuaXQwgZ8wDQYJKoZIhvcNAQEBBQADgY0AMIGJAoGB
ANTM3/BG82e0bM1J02bpyQgj2IAxWu8S+8LwSfXxGX0hWTkFp02OlAIjwhWVxuUq
f2Dq6KNtB67CeGDTldby5aERJMvxWTmCdzeNgTgxH/1HqPYrvrfEhJmAS5Dt1gz0
CC2o8xMh3pk3T9Gs+Gv6v4m6IxDEfozbtD/ZZRuaMmPLAgMBAAGjUzBRMB0GA1Ud
DgQWBBRoINT+sdRt7IhnIjulaJJZ9CK8VTAfBgNVHSMEGDAWgBRoINT+sdRt7Ihn
IjulaJJZ9CK8VTAPBgNVHRMBAf8EBTADAQH/MA0GCSqGSIb3DQEBCwUAA4GBABm6
daizGCsh0AuZYZ9YkKvXkE6nvvTaj/0hJ9Y6l1aV0x8RgMSr11bFd2E46mUrdSkG
RUdgKsE2DjVCPHzY3II75NRPboetuiMuo88c1A7aD8RWIkvbAD1QuUAXi1gqluMd
9B/cIUNrw4yChLOO9GemuvOa7xlu7GubulzJjVcw
-----END CERTIFICATE-----
"""


def test_a_denial_names_the_certificates_subject_as_kafka_does(tmp_path: Path) -> None:
    cert = tmp_path / "c.crt"
    cert.write_text(UNIT_CERT)
    conf = {"security.protocol": "SSL", "ssl.certificate.location": str(cert)}
    assert principal(conf) == "User:CN=offsetd-unit,O=acme"  # RFC 2253: most specific first
    assert principal({**conf, "ssl.certificate.location": str(tmp_path / "gone")}) == (
        "the client certificate's principal"
    )
