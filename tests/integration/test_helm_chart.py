"""The Helm chart (deploy/helm/offsetd) against the real kube-apiserver of the Strimzi tests.

`helm` is built from the Go module proxy (`offsetd.devstack.kubebin.ensure_helm`); every
rendering is applied with server-side apply to the API server, which also serves Strimzi's CRDs
and the Prometheus Operator's (deploy/local/k8s-prometheus-operator-crds, v0.93.0), so each
object is checked by the real validation (built-in schemas, the CRDs' OpenAPI schemas). The
service account the chart makes is then used as is: `kubectl auth can-i --list` with its token,
and `offsetd run` with its token, the config and the rules the chart rendered (read back from the
API server) and the Deployment's own container args, healing a poison record in a
Strimzi-managed sink. Only what a pod adds is played here: the paths of the pod's volumes, and
the token a pod would find mounted (a kubeconfig instead). No kubelet runs, so no pod starts.

About 2 minutes in one lane: each rendering is applied to the real API server, and a poison record
is healed through the chart's service account.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.config.fields import REDACTED
from offsetd.devstack.kube import KubeCluster
from offsetd.devstack.kubebin import ensure_helm
from offsetd.devstack.stack import StackInfo
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.lagutil import OFFSETD
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_guardrails import POISON, Sink, daemon_setup, good, wait_committed
from tests.integration.test_heal_in_the_field import (
    assert_healed,
    shorten_restart_backoff,
    wait_skip,
)
from tests.integration.test_skip_without_dlq import config_of

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "offsetd"
PROMETHEUS_CRDS = REPO / "deploy" / "local" / "k8s-prometheus-operator-crds"
ALERT_RULES = REPO / "deploy" / "prometheus" / "offsetd-rules.yml"
ROLE = REPO / "deploy" / "kubernetes" / "offsetd-role.yaml"
DEFAULT_KINDS = {
    "ConfigMap",
    "Deployment",
    "PodDisruptionBudget",
    "Role",
    "RoleBinding",
    "Service",
    "ServiceAccount",
}


# -- tools ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> Path:
    return ensure_helm(log=print)


def run(argv: list[str], *, input_text: str | None = None, ok: bool = True) -> str:
    done = subprocess.run(argv, input=input_text, capture_output=True, text=True, check=False)
    if ok and done.returncode != 0:
        raise AssertionError(f"{argv[:4]} failed ({done.returncode}): {done.stderr[-3000:]}")
    if not ok and done.returncode == 0:
        raise AssertionError(f"{argv[:4]} should have failed: {done.stdout[-2000:]}")
    return done.stdout if ok else done.stderr


def kubectl(kube: KubeCluster, *args: str, input_text: str | None = None, ok: bool = True) -> str:
    tool = shutil.which("kubectl")
    assert tool, "kubectl is needed by the chart tests"
    return run(
        [tool, f"--kubeconfig={kube.info().admin_kubeconfig}", *args], input_text=input_text, ok=ok
    )


def render(helm: Path, release: str, namespace: str, values: dict[str, Any], tmp: Path) -> str:
    path = tmp / f"values-{release}.yaml"
    path.write_text(json.dumps(values))
    return run([str(helm), "template", release, str(CHART), "-n", namespace, "-f", str(path)])


def documents(manifest: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(manifest) if d]


def apply(kube: KubeCluster, manifest: str) -> None:
    """Server-side apply of a rendering, as `helm install` or a GitOps tool would send it (every
    namespaced object names its namespace: the release's, or one of `rbac.namespaces`)."""
    kubectl(
        kube,
        "apply",
        "--server-side",
        "--field-manager=offsetd-chart-test",
        "-f",
        "-",
        input_text=manifest,
    )


def namespace_of(kube: KubeCluster, prefix: str) -> str:
    name = unique(prefix).lower().replace("_", "-")[:40]
    kubectl(kube, "create", "namespace", name)
    return name


@pytest.fixture(scope="module")
def kube(kube_v1: KubeCluster) -> KubeCluster:
    """The Strimzi tests' API server, with the Prometheus Operator's CRDs too."""
    kubectl(kube_v1, "apply", "--server-side", "-f", str(PROMETHEUS_CRDS))
    crds = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")

    # not `kubectl wait --for=condition=Established`: on a CRD whose status the API server has
    # not written yet it fails at once (".status.conditions accessor error") instead of waiting
    def established() -> bool:
        for crd in crds:
            got = json.loads(kubectl(kube_v1, "get", f"crd/{crd}", "-o=json"))
            conditions = got.get("status", {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return False
        return True

    wait_for("the Prometheus Operator's CRDs established", established, 60)
    return kube_v1


def all_on(namespace: str, other: str) -> dict[str, Any]:
    """Every optional part of the chart switched on."""
    return {
        "replicaCount": 3,
        "image": {"repository": "registry.example/offsetd", "tag": "0.1.0"},
        "imagePullSecrets": [{"name": "registry"}],
        "mode": "enforce",
        "logLevel": "debug",
        "config": {
            "kafka_clusters": {
                "main": {
                    "bootstrap_servers": "my-cluster-kafka-bootstrap:9093",
                    "security_protocol": "SASL_SSL",
                    "sasl": {"mechanism": "SCRAM-SHA-512", "username": "offsetd"},
                    "tls": {"ca_file": "/etc/offsetd/tls/cluster-ca/ca.crt"},
                }
            },
            "connect_clusters": {
                "main": {
                    "url": "https://my-connect-connect-api:8083",
                    "kafka_cluster": "main",
                    "auth": {"username": "offsetd"},
                    "strimzi": {"namespace": namespace, "kafka_connect": "my-connect"},
                }
            },
            "daemon": {"partitions": 8},
        },
        "secretEnv": [
            {
                "name": "OFFSETD_KAFKA_CLUSTERS__MAIN__SASL__PASSWORD",
                "secretName": "offsetd",
                "secretKey": "password",
            },
            {
                "name": "OFFSETD_REMEDIATION__WEBHOOKS__ONCALL",
                "secretName": "offsetd-webhooks",
                "secretKey": "oncall",
            },
        ],
        "secretMounts": [
            {
                "name": "cluster-ca",
                "secretName": "my-cluster-cluster-ca-cert",
                "mountPath": "/etc/offsetd/tls/cluster-ca",
            }
        ],
        "rules": {
            "files": {"page.yaml": (REPO / "rules/examples/needs-a-person.yaml").read_text()}
        },
        "rbac": {"namespaces": [namespace, other]},
        "serviceAccount": {"annotations": {"example.com/owner": "sre"}},
        "podAnnotations": {"example.com/team": "data"},
        "podLabels": {"team": "data"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka"}],
        "priorityClassName": "system-cluster-critical",
        "monitoring": {
            "serviceMonitor": {"enabled": True},
            "prometheusRule": {"enabled": True},
            "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Kafka"}},
        },
    }


LOGINS_SCRAM = {"scram": {"username": "offsetd", "secretName": "offsetd-east"}}


def login_secrets() -> dict[str, dict[str, str]]:
    """Secrets shaped as Strimzi (cluster CA, KafkaUser of type tls and scram-sha-512) and the
    user keep them, each value random: none may be found in what the chart renders."""

    def value(what: str) -> str:
        return f"{what}-{secrets.token_hex(12)}"

    return {
        "my-cluster-cluster-ca-cert": {"ca.crt": value("cluster-ca")},
        "offsetd": {"user.crt": value("user-crt"), "user.key": value("user-key")},
        "offsetd-east": {"password": value("scram-password")},
        "offsetd-oauth": {"clientSecret": value("client-secret")},
        "sso-ca": {"tls.crt": value("sso-ca")},
        "connect-ca": {"ca.crt": value("connect-ca")},
        "connect-offsetd": {"password": value("rest-password")},
        "connect-client": {"tls.crt": value("rest-crt"), "tls.key": value("rest-key")},
    }


def logins_values() -> dict[str, Any]:
    """One alias per login: mutual TLS (main), SCRAM (east), OAuth (sso), Connect with all."""
    return {
        "config": {
            "kafka_clusters": {
                "main": {"bootstrap_servers": "my-cluster-kafka-bootstrap:9093"},
                "east": {"bootstrap_servers": "east-kafka-bootstrap:9095"},
                "sso": {"bootstrap_servers": "sso-kafka-bootstrap:9096"},
            },
            "connect_clusters": {
                "main": {"url": "https://my-connect-connect-api:8083", "kafka_cluster": "main"}
            },
        },
        "logins": {
            "kafka": {
                "main": {
                    "ca": {"secretName": "my-cluster-cluster-ca-cert"},
                    "tls": {"secretName": "offsetd"},
                },
                "east": {"ca": {"secretName": "my-cluster-cluster-ca-cert"}, **LOGINS_SCRAM},
                "sso": {
                    "ca": {"secretName": "my-cluster-cluster-ca-cert"},
                    "oauth": {
                        "tokenEndpointUrl": "https://sso.example/realms/kafka/token",
                        "clientId": "offsetd",
                        "clientSecret": {"secretName": "offsetd-oauth"},
                        "scope": "kafka",
                        "ca": {"secretName": "sso-ca", "key": "tls.crt"},
                    },
                },
            },
            "connect": {
                "main": {
                    "ca": {"secretName": "connect-ca"},
                    "basic": {"username": "offsetd", "secretName": "connect-offsetd"},
                    "tls": {"secretName": "connect-client"},
                }
            },
        },
    }


# -- lint and schema ------------------------------------------------------------------------


def test_helm_lint_passes_strict_with_the_defaults_and_everything_on(
    helm: Path, tmp_path: Path
) -> None:
    out = run([str(helm), "lint", "--strict", str(CHART)])
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    values = tmp_path / "all-on.yaml"
    values.write_text(json.dumps(all_on("kafka", "kafka-2")))
    out = run([str(helm), "lint", "--strict", str(CHART), "-f", str(values)])
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"monitoring": {"serviceMonitor": {"enable": True}}}, "'enable' not allowed"),
        ({"replicaCount": 9}, "replicaCount 9 is above config.daemon.partitions (8)"),
        (
            {"replicaCount": 5, "config": {"daemon": {"partitions": 4}}},
            "replicaCount 5 is above config.daemon.partitions (4)",
        ),
        (
            {"config": {"kafka_clusters": {"main": {"sasl": {"password": "hunter2-inline"}}}}},
            "at '/config/kafka_clusters/main/sasl/password': value must be '(a secret: never "
            "inline, give it with secretEnv or secretMounts)'",
        ),
        (
            {"config": {"remediation": {"webhooks": {"oncall": "https://hooks.example/t0k3n"}}}},
            "at '/config/remediation/webhooks'",
        ),
        (
            {"config": {"kafka_clusters": {"m": {"properties": {"sasl.jaas.config": "x"}}}}},
            "at '/config/kafka_clusters/m/properties/sasl.jaas.config'",
        ),
        ({"config": {"daemon": {"web_port": 1}}}, "set by the chart from service.port"),
        ({"mode": "fix"}, "at '/mode': value must be one of '', 'observe', 'enforce'"),
        (
            {
                "config": {"kafka_clusters": {"main": {"bootstrap_servers": "b:9093"}}},
                "logins": {
                    "kafka": {"main": {"tls": {"secretName": "u"}, "scram": LOGINS_SCRAM["scram"]}}
                },
            },
            "logins.kafka.main: give one login of scram, tls or oauth, not scram and tls",
        ),
        (
            {"logins": {"kafka": {"east": LOGINS_SCRAM}}},
            'logins.kafka.east: no kafka_clusters alias "east" in config.kafka_clusters',
        ),
        (
            {"logins": {"kafka": {"m": {"oauth": {"tokenEndpointUrl": "https://s/t"}}}}},
            "at '/logins/kafka/m/oauth': missing properties 'clientId', 'clientSecret'",
        ),
        (
            {"secretEnv": [{"name": "PASSWORD", "secretName": "s", "secretKey": "k"}]},
            "'PASSWORD' does not match pattern '^OFFSETD_[A-Z0-9_]+$'",
        ),
    ],
)
def test_a_wrong_value_fails_the_install_naming_it(
    helm: Path, kube: KubeCluster, tmp_path: Path, values: dict[str, Any], message: str
) -> None:
    path = tmp_path / "values.yaml"
    path.write_text(json.dumps(values))
    err = run(
        [
            str(helm),
            "install",
            "wrong",
            str(CHART),
            "--dry-run=server",
            f"--kubeconfig={kube.info().admin_kubeconfig}",
            "-n",
            "default",
            "-f",
            str(path),
        ],
        ok=False,
    )
    assert message in err, err
    assert "hunter2-inline" not in err
    assert "t0k3n" not in err


# -- applied to the API server --------------------------------------------------------------


def test_the_default_rendering_is_accepted_and_complete(
    helm: Path, kube: KubeCluster, tmp_path: Path
) -> None:
    namespace = namespace_of(kube, "chart-default")
    manifest = render(helm, "offsetd", namespace, {}, tmp_path)
    docs = documents(manifest)
    assert {d["kind"] for d in docs} == DEFAULT_KINDS
    apply(kube, manifest)
    for doc in docs:  # each object is on the server, as sent
        got = json.loads(
            kubectl(kube, "get", "-n", namespace, doc["kind"], doc["metadata"]["name"], "-o=json")
        )
        assert got["metadata"]["labels"]["app.kubernetes.io/name"] == "offsetd"
    deployment = json.loads(kubectl(kube, "get", "-n", namespace, "deploy/offsetd", "-o=json"))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True  # the in-cluster login's token
    [container] = pod["containers"]
    assert container["args"] == [
        "run",
        "--config=/etc/offsetd/config/offsetd.yaml",
        "--log-level=info",
    ]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert {m["mountPath"] for m in container["volumeMounts"]} == {
        "/etc/offsetd/config",
        "/etc/offsetd/rules",
        "/var/lib/offsetd",
        "/tmp",
    }
    service = json.loads(kubectl(kube, "get", "-n", namespace, "svc/offsetd", "-o=json"))
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("metrics", 6066)]
    rules = json.loads(kubectl(kube, "get", "-n", namespace, "cm/offsetd-rules", "-o=json"))
    shipped = sorted(p.name for p in (REPO / "rules" / "examples").glob("*.yaml"))
    assert sorted(rules["data"]) == shipped
    role = json.loads(kubectl(kube, "get", "-n", namespace, "role/offsetd", "-o=json"))
    assert role["rules"] == YAML(typ="safe").load(ROLE.read_text())["rules"]


def test_everything_on_is_accepted_and_monitoring_is_wired(
    helm: Path, kube: KubeCluster, tmp_path: Path
) -> None:
    namespace = namespace_of(kube, "chart-all")
    other = namespace_of(kube, "chart-other")
    manifest = render(helm, "ops", namespace, all_on(namespace, other), tmp_path)
    docs = documents(manifest)
    kinds = sorted(d["kind"] for d in docs)
    assert set(kinds) == DEFAULT_KINDS | {"ServiceMonitor", "PrometheusRule"}
    assert kinds.count("Role") == 2  # one per namespace holding Strimzi resources
    assert kinds.count("ConfigMap") == 2 + 3  # config, rules, three dashboards
    apply(kube, manifest)
    for kind, name, where in [
        ("Role", "ops-offsetd", other),
        ("RoleBinding", "ops-offsetd", other),
        ("ServiceMonitor", "ops-offsetd", namespace),
        ("PrometheusRule", "ops-offsetd", namespace),
    ]:
        kubectl(kube, "get", "-n", where, kind, name)

    rule = json.loads(
        kubectl(kube, "get", "-n", namespace, "prometheusrule/ops-offsetd", "-o=json")
    )
    assert rule["spec"]["groups"] == YAML(typ="safe").load(ALERT_RULES.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    monitor = json.loads(
        kubectl(kube, "get", "-n", namespace, "servicemonitor/ops-offsetd", "-o=json")
    )
    service = json.loads(kubectl(kube, "get", "-n", namespace, "svc/ops-offsetd", "-o=json"))
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    # the job label OffsetdDown matches (up{job="offsetd"}) comes from this Service label
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "offsetd"

    dashboards = json.loads(
        kubectl(kube, "get", "-n", namespace, "cm", "-l", "grafana_dashboard=1", "-o=json")
    )["items"]
    shipped = {p.name: json.loads(p.read_text()) for p in (REPO / "grafana/dashboards").glob("*")}
    assert {k: json.loads(v) for d in dashboards for k, v in d["data"].items()} == shipped
    assert {d["metadata"]["annotations"]["grafana_folder"] for d in dashboards} == {"Kafka"}

    deployment = json.loads(kubectl(kube, "get", "-n", namespace, "deploy/ops-offsetd", "-o=json"))
    assert deployment["spec"]["replicas"] == 3
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/offsetd:0.1.0"
    assert "--enforce" in container["args"]
    secrets = {
        e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e
    }
    assert secrets == {
        "OFFSETD_KAFKA_CLUSTERS__MAIN__SASL__PASSWORD": {"name": "offsetd", "key": "password"},
        "OFFSETD_REMEDIATION__WEBHOOKS__ONCALL": {"name": "offsetd-webhooks", "key": "oncall"},
    }
    config = json.loads(kubectl(kube, "get", "-n", namespace, "cm/ops-offsetd-config", "-o=json"))
    assert "password" not in config["data"]["offsetd.yaml"]
    budget = json.loads(kubectl(kube, "get", "-n", namespace, "pdb/ops-offsetd", "-o=json"))
    assert budget["spec"]["maxUnavailable"] == 1


def test_each_login_is_taken_by_reference_and_no_secret_value_is_rendered(
    helm: Path, kube: KubeCluster, tmp_path: Path
) -> None:
    """Each login's Secrets (Strimzi's names and keys) are mounted or passed by reference; the
    ConfigMap holds only paths, names and URLs. The pod is then played from what the API server
    kept: each volume's items written at their mount paths, each variable read from its Secret,
    and offsetd reads that config and environment into the logins it was meant to."""
    namespace = namespace_of(kube, "chart-logins")
    kept = login_secrets()
    secret_values = [v for data in kept.values() for v in data.values()]
    for name, data in kept.items():
        metadata = {"name": name, "namespace": namespace}
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "stringData": data}
        apply(kube, json.dumps(secret))
    manifest = render(helm, "login", namespace, logins_values(), tmp_path)
    assert not [v for v in secret_values if v in manifest]
    apply(kube, manifest)

    def get(what: str) -> dict[str, Any]:
        return dict(json.loads(kubectl(kube, "get", "-n", namespace, what, "-o=json")))

    pod = get("deploy/login-offsetd")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    root = tmp_path / "pod"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    login_volumes = [v for v in pod["volumes"] if v["name"].startswith("login-")]
    assert len(login_volumes) == 7
    for volume in login_volumes:  # what the kubelet writes: each item of the Secret, as a file
        source = volume["secret"]
        assert source["defaultMode"] == 0o440
        data = get(f"secret/{source['secretName']}")["data"]
        folder = root / mounts[volume["name"]].lstrip("/")
        folder.mkdir(parents=True)
        for item in source["items"]:
            (folder / item["path"]).write_bytes(base64.b64decode(data[item["key"]]))
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for variable in container["env"]:
        ref = variable.get("valueFrom", {}).get("secretKeyRef")
        if ref is not None:
            data = get(f"secret/{ref['name']}")["data"]
            env[variable["name"]] = base64.b64decode(data[ref["key"]]).decode()
    assert set(env) - {"HOME", "PATH"} == {
        "OFFSETD_KAFKA_CLUSTERS__EAST__SASL__PASSWORD",
        "OFFSETD_KAFKA_CLUSTERS__SSO__SASL__OAUTH__CLIENT_SECRET",
        "OFFSETD_CONNECT_CLUSTERS__MAIN__AUTH__PASSWORD",
    }
    rendered = get("cm/login-offsetd-config")["data"]["offsetd.yaml"]
    assert not [v for v in secret_values if v in rendered]
    config = tmp_path / "offsetd.yaml"
    config.write_text(rendered.replace("/etc/offsetd/logins/", f"{root}/etc/offsetd/logins/"))
    done = subprocess.run(
        [str(OFFSETD), "config", "show", f"--config={config}", "--output=json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert not [v for v in secret_values if v in done.stdout + done.stderr]
    shown = json.loads(done.stdout)
    kafka, connect = shown["kafka_clusters"], shown["connect_clusters"]["main"]

    def content(path: str) -> str:
        return Path(path).read_text()

    assert kafka["main"]["security_protocol"] == "SSL"
    assert content(kafka["main"]["tls"]["ca_file"]) == kept["my-cluster-cluster-ca-cert"]["ca.crt"]
    assert content(kafka["main"]["tls"]["cert_file"]) == kept["offsetd"]["user.crt"]
    assert content(kafka["main"]["tls"]["key_file"]) == kept["offsetd"]["user.key"]
    assert kafka["main"]["sasl"] is None
    assert kafka["east"]["security_protocol"] == "SASL_SSL"
    assert kafka["east"]["sasl"]["mechanism"] == "SCRAM-SHA-512"
    assert kafka["east"]["sasl"]["username"] == "offsetd"
    assert kafka["east"]["sasl"]["password"] == REDACTED  # given, by the Secret's variable
    oauth = kafka["sso"]["sasl"]["oauth"]
    assert kafka["sso"]["sasl"]["mechanism"] == "OAUTHBEARER"
    assert oauth["token_endpoint_url"] == "https://sso.example/realms/kafka/token"
    assert (oauth["client_id"], oauth["scope"]) == ("offsetd", "kafka")
    assert oauth["client_secret"] == REDACTED
    assert content(oauth["ca_file"]) == kept["sso-ca"]["tls.crt"]
    assert connect["auth"] == {"username": "offsetd", "password": REDACTED}
    assert content(connect["tls"]["ca_file"]) == kept["connect-ca"]["ca.crt"]
    assert content(connect["tls"]["cert_file"]) == kept["connect-client"]["tls.crt"]
    assert content(connect["tls"]["key_file"]) == kept["connect-client"]["tls.key"]


def test_cluster_wide_rbac_is_accepted(helm: Path, kube: KubeCluster, tmp_path: Path) -> None:
    namespace = namespace_of(kube, "chart-cw")
    manifest = render(helm, "cw", namespace, {"rbac": {"clusterWide": True}}, tmp_path)
    kinds = {d["kind"] for d in documents(manifest)}
    assert {"ClusterRole", "ClusterRoleBinding"} <= kinds
    assert not {"Role", "RoleBinding"} & kinds
    apply(kube, manifest)
    kubectl(kube, "get", "clusterrole/cw-offsetd", "clusterrolebinding/cw-offsetd")


# -- the service account's rights, used ------------------------------------------------------


def _rights(kube: KubeCluster, kubeconfig: Path, namespace: str) -> dict[str, list[str]]:
    """`kubectl auth can-i --list` with the account's own token: resource -> verbs (the
    self-review resources every account has are left out)."""
    tool = shutil.which("kubectl")
    assert tool
    out = run([tool, f"--kubeconfig={kubeconfig}", "auth", "can-i", "--list", "-n", namespace])
    rights = {}
    for line in out.splitlines()[1:]:
        resource = line.split()[0]
        if resource.startswith("self") or resource.startswith("["):
            continue  # selfsubject*reviews; non-resource URLs (discovery)
        verbs = re.findall(r"\[([^\]]*)\]", line)[-1]  # the last column
        rights[resource] = sorted(verbs.split())
    return rights


def test_the_charts_service_account_may_do_exactly_what_the_strimzi_backend_needs(
    helm: Path, kube: KubeCluster, tmp_path: Path
) -> None:
    namespace = namespace_of(kube, "chart-rbac")
    elsewhere = namespace_of(kube, "chart-elsewhere")
    apply(kube, render(helm, "rbac", namespace, {}, tmp_path))
    token = kube.kubeconfig_for(namespace, "rbac-offsetd")
    assert _rights(kube, token, namespace) == {
        "configmaps": ["create", "get", "patch"],
        "events.events.k8s.io": ["create", "patch"],
        "kafkaconnectors.kafka.strimzi.io": ["get", "list", "patch"],
        "kafkaconnects.kafka.strimzi.io": ["get", "list"],
        "kafkamirrormaker2s.kafka.strimzi.io": ["get", "list", "patch"],
    }
    assert _rights(kube, token, elsewhere) == {}


def test_offsetd_with_the_charts_account_config_and_rules_skips_a_poison_record(
    helm: Path,
    kube: KubeCluster,
    stack: StackInfo,
    connect: ConnectClient,
    tmp_path: Path,
    strimzi_ns: Any,
) -> None:
    ns: StrimziNamespace = strimzi_ns(kube, interval_s=5.0)
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    with daemon_setup(stack, tmp_path, mode="enforce", remediation=remediation) as setup:
        data = setup.data
        config = {
            "kafka_clusters": data["kafka_clusters"],
            "connect_clusters": data["connect_clusters"],
            "daemon": {
                k: v
                for k, v in data["daemon"].items()
                if k in ("app_id", "partitions", "audit_topic")
            },
            "remediation": {**data["remediation"], "scope": {"connectors": [f"{setup.prefix}*"]}},
        }
        # in a pod, no kubeconfig: the service account's mounted token
        config["connect_clusters"]["local"]["strimzi"] = {
            "namespace": ns.namespace,
            "operator_timeout": "60s",
        }
        values = {
            "mode": "enforce",
            "service": {"port": data["daemon"]["web_port"]},
            "config": config,
        }
        apply(kube, render(helm, "heal", ns.namespace, values, tmp_path))

        # what a pod of the Deployment would get, read back from the API server
        def get(what: str) -> dict[str, Any]:
            return dict(json.loads(kubectl(kube, "get", "-n", ns.namespace, what, "-o=json")))

        [container] = get("deploy/heal-offsetd")["spec"]["template"]["spec"]["containers"]
        setup.config.write_text(get("cm/heal-offsetd-config")["data"]["offsetd.yaml"])
        rules_dir = tmp_path / "chart-rules"
        rules_dir.mkdir()
        for name, text in get("cm/heal-offsetd-rules")["data"].items():
            (rules_dir / name).write_text(text)
        # the chart's rules, but for the restart rule's backoff (its own settings): the real
        # 30 s / 60 s is proven once, by test_heal_in_the_field
        shorten_restart_backoff(rules_dir)
        args = [
            f"--config={setup.config}" if a.startswith("--config=") else a
            for a in container["args"]
        ]
        assert args[0] == "run"
        assert "--enforce" in args
        env = {  # the pod's volumes and token, outside a pod
            "OFFSETD_DAEMON__DATA_DIR": str(tmp_path / "state"),
            "OFFSETD_DAEMON__RULES_DIR": str(rules_dir),
            "OFFSETD_CONNECT_CLUSTERS__LOCAL__STRIMZI__KUBECONFIG": str(
                kube.kubeconfig_for(ns.namespace, "heal-offsetd")
            ),
        }

        topic = unique(f"{setup.prefix}-t")
        create_topic(setup.west, topic)
        produce(setup.west, topic, good(range(3)))
        name = f"{setup.prefix}-sink".lower()
        out = tmp_path / f"{name}.txt"
        ns.connector(name, dlq_json_file_sink(topic, out, setup.dlq))
        connect.wait_running(name)
        sink = Sink(name, topic, out)
        original = config_of(connect, name)
        spec = ns.get("KafkaConnector", name)["spec"]
        wait_committed(connect, sink, 3)
        setup.start(args=args, env=env)
        offsets = produce(setup.west, topic, [*good(range(3, 33)), POISON])
        offsets += produce(setup.west, topic, good(range(33, 63)))

        done = wait_skip(setup, name, timeout_s=400)
        assert done["rule"] == "poison-record-skip", done
        assert done["record"]["offset"] == offsets[30]
        assert_healed(connect, sink, original)
        after = ns.get("KafkaConnector", name)["spec"]
        assert {k: v for k, v in after.items() if k not in ("alterOffsets", "listOffsets")} == spec
        # it went through the resource: offsetd wrote the offsets ConfigMap with the chart's RBAC
        assert ns.configmap(f"{name}-offsetd-alter-offsets") is not None
        wait_for(
            "the daemon's /readyz",
            lambda: setup.daemon is not None and _ready(setup.data["daemon"]["web_port"]),
            30,
        )


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
