"""Pure parts of the `--login oauth` stack: Hydra's public side on HTTPS (the admin side plain
HTTP on loopback), the brokers' JWKS fetch trusting the stack's CA through the OAUTH listener's
JAAS options only, and the config `dev env --write-config` writes (the CA as `oauth.ca_file`)."""

from __future__ import annotations

import json
from pathlib import Path

from ruamel.yaml import YAML

from offsetd.config import load_settings
from offsetd.devstack import kafka
from offsetd.devstack.oauth import OAuthLogin
from offsetd.devstack.oidc import HydraProvider, HydraTls
from offsetd.devstack.security import StackSecurity
from offsetd.devstack.stack import _security_info
from offsetd.devstack.tls import TlsMaterial
from tests.unit.devstack.stackinfo import secure_stack_info

STORE_PASSWORD = 'store-"pw"'


def _login(tmp_path: Path) -> OAuthLogin:
    hydra_tls = HydraTls(tmp_path / "hydra.crt", tmp_path / "hydra-key.pem", tmp_path / "ca.pem")
    provider = HydraProvider(4444, 4445, 30, hydra_tls)
    return OAuthLogin(
        provider,
        "client-uuid",
        tmp_path / "secret",
        tmp_path / "hydra.log",
        (9192, 9193),
        tmp_path / "truststore.p12",
        STORE_PASSWORD,
    )


def _security(tmp_path: Path) -> StackSecurity:
    tls = TlsMaterial(
        tmp_path / "ca.pem",
        tmp_path / "ca.p12",
        tmp_path / "server.p12",
        tmp_path / "truststore.p12",
        STORE_PASSWORD,
    )
    passwords = {p: f"pw-{p}" for p in ("admin", "broker", "connect", "mm2", "offsetd")}
    return StackSecurity(tls, passwords, {"offsetd": "r", "admin": "ra"}, tmp_path)


def test_hydra_serves_its_public_side_on_https_and_its_admin_side_on_loopback_http(
    tmp_path: Path,
) -> None:
    provider = _login(tmp_path).provider
    assert provider.issuer == "https://127.0.0.1:4444"
    assert provider.token_url == "https://127.0.0.1:4444/oauth2/token"
    assert provider.jwks_url == "https://127.0.0.1:4444/.well-known/jwks.json"
    assert provider.admin_url == "http://127.0.0.1:4445"
    config = json.loads(provider.write_config(tmp_path).read_text())
    public, admin = config["serve"]["public"], config["serve"]["admin"]
    # Hydra reads the paths only when the interface's TLS is enabled
    assert public["tls"] == {
        "enabled": True,
        "cert": {"path": str(tmp_path / "hydra.crt")},
        "key": {"path": str(tmp_path / "hydra-key.pem")},
    }
    assert admin["tls"] == {"enabled": False}
    assert (admin["host"], public["host"]) == ("127.0.0.1", "127.0.0.1")
    assert config["urls"]["self"]["issuer"] == provider.issuer
    argv = provider.argv(Path("/bin/hydra"), tmp_path / "hydra.json")
    assert "--dev" not in argv  # nothing needs it: the issuer is HTTPS


def test_the_brokers_fetch_the_jwks_over_https_trusting_the_stack_ca_on_the_oauth_listener(
    tmp_path: Path,
) -> None:
    login = _login(tmp_path)
    node = kafka.KafkaNode(
        "west", 9092, 9093, kafka.new_cluster_id(), tmp_path, _security(tmp_path), login, 9192
    )
    props = node.properties()
    jaas = str(props["listener.name.oauth.oauthbearer.sasl.jaas.config"])
    assert jaas.startswith("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule")
    assert f'ssl.truststore.location="{tmp_path / "truststore.p12"}"' in jaas
    assert 'ssl.truststore.password="store-\\"pw\\""' in jaas  # quoted: one JAAS value
    assert 'ssl.truststore.type="PKCS12"' in jaas
    # the broker's own (unused) login on the listener needs a subject once options are given
    assert 'unsecuredLoginStringClaim_sub="broker"' in jaas
    assert jaas.endswith(";")
    assert props["sasl.oauthbearer.jwks.endpoint.url"] == (
        "https://127.0.0.1:4444/.well-known/jwks.json"
    )
    assert props["sasl.oauthbearer.expected.issuer"] == "https://127.0.0.1:4444"
    # only the OAUTH listener's JAAS entry names the truststore: no JVM-wide trust store
    (allowed,) = login.jvm_options()
    assert allowed == (
        "-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="
        "https://127.0.0.1:4444/.well-known/jwks.json,https://127.0.0.1:4444/oauth2/token"
    )
    assert "javax.net.ssl" not in " ".join(login.jvm_options())


def test_the_written_config_trusts_the_token_endpoint_through_oauth_ca_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    login = _login(tmp_path)
    security = _security_info(_security(tmp_path))
    security["oauth"] = login.describe()
    clusters = {
        "east": {"bootstrap.servers": "127.0.0.1:1", "oauth.bootstrap.servers": "127.0.0.1:3"},
        "west": {"bootstrap.servers": "127.0.0.1:2", "oauth.bootstrap.servers": "127.0.0.1:4"},
    }
    info = secure_stack_info(tmp_path, security, clusters)
    path = tmp_path / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(info.offsetd_config(), out)
    (tmp_path / "secret").write_text("client-secret\n")
    settings = load_settings(path, {})
    conf = settings.kafka_clusters["west"].client_config()
    assert conf["sasl.oauthbearer.token.endpoint.url"] == "https://127.0.0.1:4444/oauth2/token"
    # the token endpoint's CA (librdkafka's token fetch) and the brokers' are the stack's one CA
    assert conf["https.ca.location"] == str(tmp_path / "ca.pem")
    assert conf["ssl.ca.location"] == str(tmp_path / "ca.pem")
    assert conf["bootstrap.servers"] == "127.0.0.1:4"
