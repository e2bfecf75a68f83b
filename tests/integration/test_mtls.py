"""Every offsetd path on the client-certificate stack (`offsetd dev up --secure --login mtls`).

Brokers serve only SSL listeners that require a certificate of the stack's CA, and the
principal is the certificate's subject (`User:CN=offsetd`, Kafka's default mapping, as Strimzi's
`tls` KafkaUsers); Connect's REST API requires one too. offsetd's configuration is the one
`offsetd dev env --write-config` writes: `tls.cert_file`/`key_file`, no password anywhere.

Lean on purpose (one stack start for the group): the daemon heals a poison record; one sink
goes through the toolkit online (REST) and offline (its group, Connect's offsets topic), the
Spark rewind plan and `offsetd lag`; a missing or untrusted certificate is one line against
Kafka and against Connect; least privilege as test_least_privilege proves it for SCRAM (its
parts are `leastpriv`'s), for a certificate `CN=offsetd-lp-…` of the stack's CA: with
offsetd's ACLs every feature works, each ACL removed in turn is one line naming the operation,
the resource and `User:CN=offsetd-lp-…` (exit 58) and the feature passes once it is granted
again, and the daemon waits unready without READ on its group; the module's last test
searches everything offsetd said for the stack's key material and store password.
"""

from __future__ import annotations

import json
import ssl
import stat
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in its __all__
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from ruamel.yaml import YAML

from offsetd.devstack.jars import java_executable
from offsetd.devstack.kubebin import ensure_helm
from offsetd.devstack.mtls import client_certificate, offsetd_acls
from offsetd.devstack.stack import Stack, StackInfo
from offsetd.devstack.tls import keytool_of, make_ca
from offsetd.errors import TlsFailed
from tests.integration.demo_checks import assert_healed
from tests.integration.kafkautil import json_file_sink, unique, wait_for
from tests.integration.leastpriv import (
    NEEDS,
    Connectors,
    Principal,
    daemon_waits_for_group_read,
    every_feature_passes,
    feature_passes,
    made_connectors,
    made_principal,
    refused_without,
)
from tests.integration.secureutil import SecureConnect, Transcript, create_topic, produce

pytestmark = pytest.mark.integration

CLUSTERS = ("east", "west")
MIRROR = "east->west.MirrorSourceConnector"


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return Transcript()


@pytest.fixture(scope="module")
def config(mtls_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """offsetd.yaml as `dev env --write-config` writes it for the mTLS stack."""
    path = tmp_path_factory.mktemp("mtls-config") / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(mtls_stack.offsetd_config(), out)
    return path


@pytest.fixture(scope="module")
def sconnect(mtls_stack: StackInfo) -> SecureConnect:
    return SecureConnect(mtls_stack)  # the admin's certificate


@pytest.fixture(scope="module")
def admin(mtls_stack: StackInfo) -> dict[str, str]:
    return mtls_stack.admin_config("west")


def _folder(stack: StackInfo) -> Path:
    return Path(stack.security["folder"])


def _store_password(stack: StackInfo) -> str:
    return (_folder(stack) / "tls" / "store-password").read_text().strip()


def _with_cert(stack: StackInfo) -> ssl.SSLContext:
    """The admin's certificate and the stack's CA, for httpx."""
    context = ssl.create_default_context(cafile=stack.security["ca_pem"])
    context.load_cert_chain(*stack.security["rest_admin_cert"])
    return context


def _with_tls(config: Path, folder: Path, tls: dict[str, str]) -> Path:
    """`config` with every cluster's `tls` replaced (Kafka's and Connect's)."""
    yaml = YAML()
    doc = yaml.load(config.read_text())
    for cluster in [*doc["kafka_clusters"].values(), *doc["connect_clusters"].values()]:
        cluster["tls"] = dict(tls)
    path = folder / f"offsetd-{uuid.uuid4().hex[:6]}.yaml"
    with path.open("w") as out:
        yaml.dump(doc, out)
    return path


def _acls_of(stack: StackInfo, principal: str) -> list[str]:
    """The ACLs both clusters hold for `principal` (`User:...`), asserted the same on each."""
    held = []
    for alias in CLUSTERS:
        client = AdminClient(dict(stack.admin_config(alias)))
        found = client.describe_acls(
            AclBindingFilter(
                ResourceType.ANY,
                None,  # type: ignore[arg-type]  # None: any name
                ResourcePatternType.ANY,
                principal,
                None,  # type: ignore[arg-type]  # None: any host
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        )
        held.append(sorted(str(b) for b in found.result(timeout=30)))
    assert held[0] == held[1], (principal, held)
    return held[0]


def _committed(connect: SecureConnect, name: str) -> int | None:
    entries: list[dict[str, Any]] = connect.offsets(name)["offsets"]
    return entries[0]["offset"]["kafka_offset"] if entries else None


def _stop(connect: SecureConnect, name: str) -> None:
    connect.http.put(connect.path(name, "/stop")).raise_for_status()

    def stopped() -> bool:
        status = connect.status(name)
        return bool(status and status["connector"]["state"] == "STOPPED" and not status["tasks"])

    wait_for(f"{name} STOPPED", stopped)


# -- the login itself ---------------------------------------------------------------------------


def test_offsetd_logs_in_with_its_certificate_and_its_acls_only(
    mtls_stack: StackInfo, config: Path, transcript: Transcript
) -> None:
    """The written config names offsetd's certificate and key files (the key PKCS#8, mode 600),
    no password; the brokers hold exactly offsetd's least-privilege ACLs for `User:CN=offsetd`,
    and with them `offsetd lag` reads both clusters; Connect's REST refuses a client without a
    certificate."""
    text = config.read_text()
    assert "password" not in text.lower()
    assert "sasl" not in text
    doc = YAML(typ="safe").load(text)
    tls = doc["kafka_clusters"]["west"]["tls"]
    assert doc["kafka_clusters"]["west"]["security_protocol"] == "SSL"
    assert doc["connect_clusters"]["local"]["tls"] == tls
    key = Path(tls["key_file"])
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")

    assert _acls_of(mtls_stack, "User:CN=offsetd") == sorted(
        str(a.binding()) for a in offsetd_acls()
    )

    def checkpointed() -> dict[str, Any] | None:
        """`offsetd lag` once MM2 checkpointed the audit group (a fresh stack: not yet)."""
        lag: dict[str, Any] = transcript.json_of(config, "lag")
        assert not lag["errors"], lag["errors"]
        return lag if lag["checkpoints"] else None

    lag = wait_for("MM2's first checkpoint in `offsetd lag`", checkpointed, timeout_s=120)
    assert [p["topic"] for p in lag["partitions"]] == ["heartbeats"]  # MM2's, read on both
    assert [c["group"] for c in lag["checkpoints"]] == ["heartbeat-audit"]  # its group offsets

    url = mtls_stack.connect["url"]
    trusting = ssl.create_default_context(cafile=mtls_stack.security["ca_pem"])
    with pytest.raises(httpx.HTTPError):  # a TLS alert: no certificate
        httpx.get(url, verify=trusting, timeout=10)
    assert httpx.get(url, verify=_with_cert(mtls_stack), timeout=10).status_code == 200


def test_a_missing_or_untrusted_certificate_is_one_line(
    mtls_stack: StackInfo, config: Path, transcript: Transcript, tmp_path: Path
) -> None:
    """No certificate, and one of a CA the stack does not trust (its subject `CN=offsetd`, the
    right name): Kafka (offline toolkit, lag, a control command) and Connect's REST each fail
    in one line saying so, exit code 60, at once."""
    keytool = keytool_of(java_executable())
    stranger_ca = make_ca(keytool, tmp_path, "stranger-ca", "stranger-pw")
    stranger = client_certificate(stranger_ca, tmp_path, "offsetd", "stranger-pw")
    ca = mtls_stack.security["ca_pem"]
    untrusted = _with_tls(
        config,
        tmp_path,
        {"ca_file": ca, "cert_file": str(stranger.cert_pem), "key_file": str(stranger.key_pem)},
    )
    anonymous = _with_tls(config, tmp_path, {"ca_file": ca})
    kafka_cases = [("offsets", "list", "heartbeat-audit", "--offline"), ("lag",), ("approvals",)]
    wrongs = [
        (untrusted, "refused the client certificate"),
        (anonymous, "requires a client certificate"),
    ]
    for wrong, words in wrongs:
        for args in kafka_cases:
            done = transcript.run(wrong, *args, timeout=60)
            assert done.returncode == TlsFailed.exit_code, (args, done.stderr)
            [line] = done.stderr.strip().splitlines()  # one line, no librdkafka log
            assert words in line, (args, line)
            assert "Kafka" in line, (args, line)
    for wrong in (untrusted, anonymous):  # Connect's REST API
        done = transcript.run(wrong, "offsets", "list", "heartbeat-audit", timeout=60)
        assert done.returncode == TlsFailed.exit_code, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "Connect at https://" in line, line
        assert "refused the client certificate" in line, line


# -- the daemon ---------------------------------------------------------------------------------


def test_the_daemon_heals_a_poison_record(mtls_stack: StackInfo, tmp_path: Path) -> None:
    """`offsetd dev demo`'s daemon, on offsetd's certificate and ACLs: ingest, the skip saga,
    quarantine, audit; its config and log hold no key material."""
    from offsetd.devstack.demo import run_demo

    local = Stack(Path(mtls_stack.run_dir))
    said: list[str] = []
    demo = tmp_path / "offsetd.yaml"
    try:
        records = run_demo(local, demo, said.append, secure=True)
    finally:
        assert local.stop_extra("offsetd-run") == ["offsetd-run"]
    assert_healed(records, said)
    assert "cert_file" in demo.read_text()


# -- the toolkit, Spark and lag on one sink -------------------------------------------------------


def test_toolkit_online_offline_and_the_spark_plan(
    config: Path,
    sconnect: SecureConnect,
    admin: dict[str, str],
    transcript: Transcript,
    tmp_path: Path,
) -> None:
    """One sink: `offsets list/alter` over REST with the certificate, then `--offline` on
    its group and undone; MM2's source offsets read `--offline` from Connect's offsets topic;
    the Spark rewind plan (the certificate as Kafka's PEM key store) finds the one bad record;
    no process's command line holds the key."""
    topic, name = unique("mtls-sink"), unique("mtls-sink")
    create_topic(admin, topic)
    values = [{"i": i, "status": "bad" if i == 17 else "ok"} for i in range(30)]
    produce(admin, topic, [(None, json.dumps(v).encode()) for v in values])
    sconnect.create(name, json_file_sink(topic, tmp_path / "out.txt"))
    try:
        sconnect.wait_running(name)
        wait_for("30 committed", lambda: _committed(sconnect, name) == 30)
        listed = transcript.json_of(config, "offsets", "list", name)
        assert listed[name][0]["offset"] == {"kafka_offset": 30}
        _stop(sconnect, name)
        shifted = transcript.json_of(config, "offsets", "alter", name, "--shift-by", "-2")[0]
        assert shifted["diff"][0]["after"] == {"kafka_offset": 28}
        assert _committed(sconnect, name) == 28

        # Connect's offsets topic itself: MM2's source connector, read --offline, then by REST
        offline = transcript.json_of(config, "offsets", "list", MIRROR, "--offline")[MIRROR]
        online = transcript.json_of(config, "offsets", "list", MIRROR)[MIRROR]
        heartbeats = {"cluster": "east", "partition": 0, "topic": "heartbeats"}
        assert [e["partition"] for e in offline] == [e["partition"] for e in online]
        assert [e["partition"] for e in online] == [heartbeats]
        assert 0 < offline[0]["offset"]["offset"] <= online[0]["offset"]["offset"]
        # the sink's group, --offline
        partition = {"kafka_topic": topic, "kafka_partition": 0}
        doc = json.dumps({name: [{"partition": partition, "offset": {"kafka_offset": 5}}]})
        altered = transcript.json_of(
            config, "offsets", "alter", name, "--offline", "--file", "-", input=doc
        )[0]
        assert altered["report"]["kind"] == "sink"
        assert _committed(sconnect, name) == 5
        transcript.json_of(config, "offsets", "undo", altered["snapshot_id"], "--offline")
        assert _committed(sconnect, name) == 28

        plan = tmp_path / "plan.json"
        ran, seen = transcript.run_watched(
            config, "rewind", "plan", "--connector", name, "--mode", "first-match",
            "--predicate", "value.status = 'bad'", "--value-schema", "i INT, status STRING",
            "--out", str(plan),
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + ran.stdout
        assert json.loads(plan.read_text()) == {
            name: [{"partition": partition, "offset": {"kafka_offset": 17}}]
        }
        assert any("org.apache.spark" in line for line in seen), seen  # Spark's JVM was seen
    finally:
        sconnect.delete(name)


def test_the_charts_tls_logins_log_in(
    mtls_stack: StackInfo, config: Path, transcript: Transcript, tmp_path: Path
) -> None:
    """The Helm chart given offsetd's certificate as Strimzi keeps a `tls` KafkaUser (a Secret
    of `user.crt` and `user.key`, the cluster CA's `ca.crt`) and Connect's client certificate
    (`tls.crt`, `tls.key`) by reference: the pod is played from the rendering (each volume's
    items written at their mount paths), and offsetd with the rendered config reads MM2's
    offsets from Kafka (`--offline`) and from Connect's REST with those files."""
    written = YAML(typ="safe").load(config.read_text())
    tls = written["kafka_clusters"]["west"]["tls"]
    kept = {  # the Secrets, as Strimzi and the user keep them
        "my-cluster-cluster-ca-cert": {"ca.crt": Path(tls["ca_file"]).read_text()},
        "offsetd": {
            "user.crt": Path(tls["cert_file"]).read_text(),
            "user.key": Path(tls["key_file"]).read_text(),
        },
        "connect-client": {
            "tls.crt": Path(tls["cert_file"]).read_text(),
            "tls.key": Path(tls["key_file"]).read_text(),
        },
    }
    bare = {  # the config without its logins: the chart derives them
        section: {
            alias: {k: v for k, v in cluster.items() if k not in ("tls", "security_protocol")}
            for alias, cluster in written[section].items()
        }
        for section in ("kafka_clusters", "connect_clusters")
    }
    ca = {"secretName": "my-cluster-cluster-ca-cert"}
    values = {
        "config": bare,
        "logins": {
            "kafka": {alias: {"ca": ca, "tls": {"secretName": "offsetd"}} for alias in CLUSTERS},
            "connect": {"local": {"ca": ca, "tls": {"secretName": "connect-client"}}},
        },
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(json.dumps(values))
    chart = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "offsetd"
    done = subprocess.run(
        [str(ensure_helm(log=print)), "template", "mtls", str(chart), "-f", str(values_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [d for d in YAML(typ="safe").load_all(done.stdout) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    [configmap] = [d for d in docs if d["metadata"]["name"] == "mtls-offsetd-config"]
    pod = deployment["spec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    root = tmp_path / "pod"
    for volume in pod["volumes"]:
        if volume["name"].startswith("login-"):
            folder = root / mounts[volume["name"]].lstrip("/")
            folder.mkdir(parents=True)
            for item in volume["secret"]["items"]:
                data = kept[volume["secret"]["secretName"]][item["key"]]
                (folder / item["path"]).write_text(data)
    rendered = configmap["data"]["offsetd.yaml"]
    assert "PRIVATE KEY" not in rendered
    assert "/etc/offsetd/logins/kafka-west/tls/user.key" in rendered
    played = tmp_path / "offsetd.yaml"
    played.write_text(rendered.replace("/etc/offsetd/logins/", f"{root}/etc/offsetd/logins/"))
    offline = transcript.json_of(played, "offsets", "list", MIRROR, "--offline")[MIRROR]
    online = transcript.json_of(played, "offsets", "list", MIRROR)[MIRROR]
    heartbeats = {"cluster": "east", "partition": 0, "topic": "heartbeats"}
    assert [e["partition"] for e in online] == [e["partition"] for e in offline] == [heartbeats]


# -- least privilege for a certificate principal (tests/integration/leastpriv.py) -----------------


@pytest.fixture(scope="module")
def lp(
    mtls_stack: StackInfo,
    config: Path,
    transcript: Transcript,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Principal]:
    """A certificate `CN=offsetd-lp-…` the stack's CA signed, with offsetd's ACLs only; what
    it runs is kept in the transcript (the leak search reads it)."""
    folder = tmp_path_factory.mktemp("mtls-lp")
    with made_principal("certificate", mtls_stack, config, folder, transcript.run) as made:
        yield made


@pytest.fixture(scope="module")
def lp_connectors(
    mtls_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Connectors]:
    with made_connectors(mtls_stack, tmp_path_factory.mktemp("mtls-lp-connectors")) as made:
        yield made


def test_a_certificate_principal_with_offsetds_acls_runs_every_feature(
    mtls_stack: StackInfo, lp: Principal, lp_connectors: Connectors
) -> None:
    """The principal is the certificate's subject, and both clusters hold exactly offsetd's
    ACLs for it; with them every feature of the least-privilege table works (as for SCRAM in
    test_least_privilege)."""
    assert lp.name == f"CN={lp.login}"
    wanted = sorted(str(a.binding()) for a in offsetd_acls(lp.login))
    assert _acls_of(mtls_stack, f"User:CN={lp.login}") == wanted
    every_feature_passes(lp, lp_connectors)


@pytest.mark.parametrize("which", list(NEEDS))
def test_a_certificate_principal_missing_each_acl_is_told_which(
    mtls_stack: StackInfo, lp: Principal, lp_connectors: Connectors, which: str
) -> None:
    """Each ACL removed in turn: the feature that needs it fails in one line naming
    `User:CN=offsetd-lp-…`, the operation and the resource (exit 58); the ACL granted back, the
    same feature passes again."""
    line = refused_without(mtls_stack, lp, lp_connectors, which)
    assert f"User:{lp.name} needs {NEEDS[which][1]}" in line, line
    feature_passes(lp, lp_connectors, which, within_s=20)


def test_the_daemon_as_a_certificate_principal_waits_for_read_on_its_group(
    mtls_stack: StackInfo, lp: Principal, tmp_path: Path
) -> None:
    """The table's last ACL, READ on the daemon's own groups: without it the daemon on the
    certificate waits unready, `/readyz` naming the certificate's principal and the group, and
    starts once it is granted."""
    body = daemon_waits_for_group_read(mtls_stack, lp, tmp_path)
    assert f"User:{lp.name} needs READ on group 'offsetd-lp-" in body, body


# -- the leak search ----------------------------------------------------------------------------


def _key_lines(folder: Path) -> list[str]:
    """Every base64 line of every private key under `folder` (a leak shows at least one)."""
    lines: list[str] = []
    for key in sorted(folder.rglob("*-key.pem")):
        body = key.read_text().splitlines()
        lines += [ln for ln in body if len(ln) >= 16 and not ln.startswith("-----")]
    return lines


def test_nothing_offsetd_said_holds_key_material(
    mtls_stack: StackInfo, transcript: Transcript, lp: Principal
) -> None:
    """All the tests above made offsetd print (Spark's and librdkafka's output and command
    lines included), the demo daemon's log and the stack's logs: no line of any private key
    of the stack or of the least-privilege principal's certificate, and not the store
    password."""
    texts = dict(transcript.texts)
    assert len(texts) >= 25, sorted(texts)  # the module ran in full
    for log in sorted(Path(mtls_stack.run_dir, "logs").glob("*.log")):
        texts[f"log {log.name}"] = log.read_text(errors="replace")
    assert "log offsetd-run.log" in texts  # the daemon's
    secrets = [*_key_lines(_folder(mtls_stack)), _store_password(mtls_stack)]
    assert len(secrets) > 5 * 20  # five keys of the stack, each some twenty lines
    secrets += _key_lines(lp.config.parent)
    # the search finds key material where it is: in the key file the config names
    key_file = Path(mtls_stack.security["offsetd_key_file"]).read_text()
    assert sum(s in key_file for s in secrets) > 20
    leaks = [(what, i) for what, text in texts.items() for i, s in enumerate(secrets) if s in text]
    assert leaks == []
