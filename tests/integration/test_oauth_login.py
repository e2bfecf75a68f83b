"""offsetd logs in with OAUTHBEARER: client-credentials tokens of a real OIDC provider.

`offsetd dev up --secure --login oauth`: Ory Hydra (built from the Go module proxy) issues JWT
access tokens that live 30 s from a token endpoint on HTTPS (a certificate of the stack's CA,
which offsetd trusts through `oauth.ca_file` alone); each broker checks them on an OAUTHBEARER
listener of offsetd's own with Kafka's KIP-768 validator (Hydra's JWKS, fetched over HTTPS
trusting the stack's CA, issuer, audience) and ends every session when its token expires
(KIP-368). offsetd's OAuth client is the principal `User:<client id>` with exactly offsetd's
least-privilege ACLs; its secret is a file.

One stack start for the module: the daemon heals a poison record, keeps running past several
token lifetimes and heals a second one (so its librdkafka clients and its aiokafka clients both
fetched fresh tokens, which Hydra's log counts); the toolkit online and offline and the lag
one-shot (aiokafka's group reads) log in the same way; a wrong client secret is one line, and
so is a token endpoint whose certificate another CA's `oauth.ca_file` does not verify (both
librdkafka's token fetch and aiokafka's token provider). The last test searches everything
offsetd said and wrote, and the stack's logs, for every secret of the stack and for anything
shaped like a token.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.devstack.demo import run_demo
from offsetd.devstack.jars import java_executable
from offsetd.devstack.kubebin import ensure_helm
from offsetd.devstack.oidc import issued_tokens
from offsetd.devstack.stack import Stack, StackInfo
from offsetd.devstack.tls import keytool_of, make_ca
from offsetd.errors import KafkaAuthFailed, TlsFailed
from offsetd.oauthtoken import ClientCredentialsTokens
from tests.integration.demo_checks import assert_healed
from tests.integration.secureutil import Transcript, stack_secrets

pytestmark = pytest.mark.integration

# A compact JWS: header.payload.signature, base64url, header and payload JSON objects ("eyJ")
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}")
# Not the client's secret: what the wrong-secret test sets. Distinctive, so an echo is found.
DISTINCT_SECRET = "Qx9-distinctive-oauth-secret-3Wd"
_LIFETIMES = 4  # token lifetimes the daemon runs before it heals the second poison record


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return Transcript()


@pytest.fixture(scope="module")
def oauth_yaml(oauth_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """offsetd.yaml as `dev env --write-config` writes it: the OAuth client, secret as a file."""
    path = tmp_path_factory.mktemp("oauth-config") / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(oauth_stack.offsetd_config(), out)
    return path


def _oauth(stack: StackInfo) -> dict[str, Any]:
    oauth: dict[str, Any] = stack.security["oauth"]
    return oauth


def test_the_config_logs_in_with_the_oauth_client_on_its_listener(
    oauth_stack: StackInfo, oauth_yaml: Path
) -> None:
    west = YAML(typ="safe").load(oauth_yaml.read_text())["kafka_clusters"]["west"]
    assert west["bootstrap_servers"] == oauth_stack.clusters["west"]["oauth.bootstrap.servers"]
    assert west["bootstrap_servers"] != oauth_stack.clusters["west"]["bootstrap.servers"]
    assert west["sasl"]["mechanism"] == "OAUTHBEARER"
    assert west["sasl"]["oauth"]["client_id"] == _oauth(oauth_stack)["client_id"]
    assert set(west["sasl"]["oauth"]["client_secret"]) == {"file"}
    # the token endpoint is HTTPS, trusted through the stack's CA as oauth.ca_file
    assert west["sasl"]["oauth"]["token_endpoint_url"].startswith("https://127.0.0.1:")
    assert west["sasl"]["oauth"]["ca_file"] == oauth_stack.security["ca_pem"]


def test_the_daemon_heals_and_refreshes_its_tokens(
    oauth_stack: StackInfo, tmp_path: Path, transcript: Transcript
) -> None:
    """Two poison records healed by one daemon, the second after several token lifetimes:
    every connection it kept had to log in again with a fresh token by then (librdkafka
    re-authenticates on the connection; offsetd renews aiokafka's connections), or the broker
    would have closed it."""
    oauth = _oauth(oauth_stack)
    hydra_log = Path(oauth["hydra_log"])
    local = Stack(Path(oauth_stack.run_dir))
    config = tmp_path / "offsetd.yaml"
    said: list[str] = []
    records: list[dict[str, Any]] = []
    try:
        records = run_demo(local, config, said.append)
        assert_healed(records, said)
        daemon = next(r for r in local.live_processes() if r.name == "offsetd-run")
        healed_once = issued_tokens(hydra_log)
        # past four lifetimes since the daemon started, and at least two since the first heal
        # (a slow first heal on a loaded machine must not leave no time to count renewals)
        ttl = oauth["token_ttl_s"]
        run_until = daemon.create_time + _LIFETIMES * ttl
        time.sleep(max(2.0 * ttl, run_until - time.time()))
        before_second = issued_tokens(hydra_log)
        again: list[str] = []
        second = run_demo(local, config, again.append, keep_daemon=True)
        assert_healed(second, again)
        records += second
        said += again
        assert [r.pid for r in local.live_processes() if r.name == "offsetd-run"] == [daemon.pid]
    finally:
        daemon_log = Path(oauth_stack.run_dir, "logs", "offsetd-run.log")
        transcript.keep("daemon log", daemon_log.read_text() if daemon_log.exists() else "")
        local.stop_extra("offsetd-run")
        transcript.keep("demo", "\n".join(said))
        transcript.keep("audit", json.dumps(records))
        transcript.keep("daemon config", config.read_text() if config.exists() else "")
    # Hydra issued tokens while nothing but the daemon's running clients asked (only offsetd's
    # client is registered: every token Hydra issued was offsetd's)
    assert before_second - healed_once >= 2, (healed_once, before_second)
    brokers = "".join(
        Path(oauth_stack.logs[f"kafka-{alias}"]).read_text() for alias in ("east", "west")
    )
    assert "Could not validate the access token" not in brokers  # no expired token presented


def test_the_toolkit_and_lag_log_in_with_oauthbearer(
    oauth_yaml: Path, transcript: Transcript
) -> None:
    """MM2's source connector: its offsets over Connect's REST API, and from Connect's offsets
    topic as offsetd's OAuth principal (librdkafka); `lag` reads groups through aiokafka."""
    name = mm2.SOURCE_CONNECTOR
    online = transcript.json_of(oauth_yaml, "offsets", "list", name)
    offline = transcript.json_of(oauth_yaml, "offsets", "list", name, "--offline")
    for listed in (online, offline):
        assert mm2.HEARTBEATS_TOPIC in json.dumps(listed), listed
    lag = transcript.json_of(oauth_yaml, "lag")
    assert not lag["errors"], lag["errors"]
    assert lag["checkpoints"], "aiokafka's group reads logged in with the token provider"


def test_a_wrong_client_secret_is_one_clear_line(oauth_yaml: Path, transcript: Transcript) -> None:
    env = {
        f"OFFSETD_KAFKA_CLUSTERS__{alias.upper()}__SASL__OAUTH__CLIENT_SECRET": DISTINCT_SECRET
        for alias in (mm2.SOURCE, mm2.TARGET)
    }
    done = transcript.run(
        oauth_yaml, "offsets", "list", mm2.SOURCE_CONNECTOR, "--offline", env=env, timeout=60
    )
    assert done.returncode == KafkaAuthFailed.exit_code, done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "refused client" in lines[0], lines[0]
    assert "invalid_client" in lines[0], lines[0]
    assert "Traceback" not in done.stderr + done.stdout


@pytest.fixture(scope="module")
def foreign_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that signed nothing of the stack's (its certificate, PEM)."""
    folder = tmp_path_factory.mktemp("foreign-ca")
    return make_ca(keytool_of(java_executable()), folder, "foreign", "foreign-store-pw")[1]


def test_a_token_endpoint_of_another_ca_is_one_clear_line(
    oauth_stack: StackInfo, oauth_yaml: Path, transcript: Transcript, foreign_ca: Path
) -> None:
    """`oauth.ca_file` another CA's: librdkafka's token fetch fails its TLS handshake with
    Hydra (the brokers' own CA is still the right one), and so does aiokafka's provider."""
    url = _oauth(oauth_stack)["token_endpoint_url"]
    env = {
        f"OFFSETD_KAFKA_CLUSTERS__{alias.upper()}__SASL__OAUTH__CA_FILE": str(foreign_ca)
        for alias in (mm2.SOURCE, mm2.TARGET)
    }
    done = transcript.run(
        oauth_yaml, "offsets", "list", mm2.SOURCE_CONNECTOR, "--offline", env=env, timeout=60
    )
    assert done.returncode == TlsFailed.exit_code, done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"TLS handshake with the OAuth token endpoint {url} failed" in lines[0], lines[0]
    assert "unable to get local issuer certificate" in lines[0], lines[0]  # libcurl's reason
    assert f"(oauth.ca_file {foreign_ca})" in lines[0], lines[0]
    assert "Traceback" not in done.stderr + done.stdout
    oauth = _oauth(oauth_stack)
    secret = Path(oauth["client_secret_file"]).read_text().strip()
    form = {"scope": oauth["scope"], "audience": oauth["audience"]}
    provider = ClientCredentialsTokens(
        url, oauth["client_id"], secret, form=form, ca_file=str(foreign_ca)
    )
    with pytest.raises(TlsFailed) as refused:
        asyncio.run(provider.token())
    transcript.keep("aiokafka provider, another CA", str(refused.value))
    assert str(refused.value) == (
        f"TLS handshake with the OAuth token endpoint {url} failed: certificate verify failed: "
        f"unable to get local issuer certificate (oauth.ca_file {foreign_ca})"
    )


def test_the_charts_oauth_login_logs_in(
    oauth_stack: StackInfo, oauth_yaml: Path, transcript: Transcript, tmp_path: Path
) -> None:
    """The Helm chart given the OAuth client by reference (`logins.kafka.<alias>.oauth`, its
    secret in a Secret, the token endpoint's CA in another, the brokers' CA in Strimzi's cluster
    CA Secret): played from the rendering (the CAs at their mount paths, the secret as the
    variable its `secretKeyRef` names),
    offsetd with the rendered config reads MM2's offsets from Connect's offsets topic."""
    written = YAML(typ="safe").load(oauth_yaml.read_text())
    oauth = written["kafka_clusters"][mm2.TARGET]["sasl"]["oauth"]
    ca_file = written["kafka_clusters"][mm2.TARGET]["tls"]["ca_file"]
    secret = Path(_oauth(oauth_stack)["client_secret_file"]).read_text().strip()
    kept = {
        "my-cluster-cluster-ca-cert": {"ca.crt": Path(ca_file).read_text()},
        "sso-ca": {"ca.crt": Path(oauth["ca_file"]).read_text()},  # the token endpoint's CA
    }
    logins = {
        alias: {
            "ca": {"secretName": "my-cluster-cluster-ca-cert"},
            "oauth": {
                "tokenEndpointUrl": oauth["token_endpoint_url"],
                "clientId": oauth["client_id"],
                "clientSecret": {"secretName": "offsetd-oauth"},
                "scope": oauth["scope"],
                "audience": oauth["audience"],
                "ca": {"secretName": "sso-ca"},
            },
        }
        for alias in written["kafka_clusters"]
    }
    config = {  # the config without its logins: the chart derives them
        "kafka_clusters": {
            alias: {k: v for k, v in c.items() if k not in ("tls", "sasl", "security_protocol")}
            for alias, c in written["kafka_clusters"].items()
        },
        "connect_clusters": {  # no REST call below: its basic auth is the SCRAM stack's
            alias: {k: v for k, v in c.items() if k != "auth"}
            for alias, c in written["connect_clusters"].items()
        },
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps({"config": config, "logins": {"kafka": logins}}))
    chart = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "offsetd"
    done = subprocess.run(
        [str(ensure_helm(log=print)), "template", "sso", str(chart), "-f", str(values_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert secret not in done.stdout
    docs = [d for d in YAML(typ="safe").load_all(done.stdout) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [configmap] = [d for d in docs if d["metadata"]["name"] == "sso-offsetd-config"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    root = tmp_path / "pod"
    for volume in pod["volumes"]:
        if volume["name"].startswith("login-"):
            folder = root / mounts[volume["name"]].lstrip("/")
            folder.mkdir(parents=True)
            for item in volume["secret"]["items"]:
                data = kept[volume["secret"]["secretName"]][item["key"]]
                (folder / item["path"]).write_text(data)
    env = {  # each secretKeyRef: here only the client secret
        v["name"]: secret
        for v in container["env"]
        if v.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "offsetd-oauth"
    }
    assert sorted(env) == sorted(
        f"OFFSETD_KAFKA_CLUSTERS__{alias.upper()}__SASL__OAUTH__CLIENT_SECRET" for alias in logins
    )
    played = tmp_path / "offsetd.yaml"
    rendered = configmap["data"]["offsetd.yaml"]
    played.write_text(rendered.replace("/etc/offsetd/logins/", f"{root}/etc/offsetd/logins/"))
    name = mm2.SOURCE_CONNECTOR
    offline = transcript.json_of(played, "offsets", "list", name, "--offline", env=env)
    assert mm2.HEARTBEATS_TOPIC in json.dumps(offline), offline


def test_no_secret_and_no_token_anywhere(oauth_stack: StackInfo, transcript: Transcript) -> None:
    """Everything offsetd said and wrote above, and every log of the stack (the brokers', the
    provider's, Connect's, the daemon's): no password, no client secret, no token."""
    oauth = _oauth(oauth_stack)
    client_secret = Path(oauth["client_secret_file"]).read_text().strip()
    secrets = [*stack_secrets(oauth_stack), client_secret, DISTINCT_SECRET]
    texts = dict(transcript.texts)
    for name, log in oauth_stack.logs.items():
        texts[f"log {name}"] = Path(log).read_text(errors="replace")
    assert len(texts) >= 10, sorted(texts)  # the runs above, and the stack's logs
    assert any("OAUTHBEARER" in text for text in texts.values())  # the logs are the live ones
    leaks = [(name, i) for name, text in texts.items() for i, s in enumerate(secrets) if s in text]
    assert not leaks, leaks
    tokens = [name for name, text in texts.items() if _JWT.search(text)]
    assert not tokens, tokens
