"""offsetd logs in to Kubernetes as a pod does: the projected service-account token, rotated
under a running daemon, against the real API server.

The daemon and the CLI run in a private mount namespace (`offsetd.devstack.kubelet`) where the
test's projected folder is mounted read-only at `/var/run/secrets/kubernetes.io/serviceaccount`,
with `KUBERNETES_SERVICE_HOST/PORT` set, no `$KUBECONFIG` and an empty `$HOME`: the in-cluster
login is the one that runs, the namespace comes from the folder's `namespace` file (the config
names none). Each token is a TokenRequest bound to a Secret of its own; deleting the Secret
makes the API server refuse that token at once (its 10-minute minimum lifetime is too long to
wait for): a rotation writes token B the kubelet's way (`..data` swapped), then revokes A.

About 45 s in the group "kube": two pauses through KafkaConnectors, a CLI `offsets list`
through the stand-in operator's `listOffsets`, and one refused CLI call.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from lightkube.resources.core_v1 import Secret
from ruamel.yaml import YAML

from offsetd.devstack.kubelet import POD_SERVICE_ACCOUNT, ProjectedFolder, bound_token, in_pod_argv
from offsetd.devstack.stack import StackInfo
from tests.integration.cliutil import leaf_argv
from tests.integration.kafkautil import (
    ConnectClient,
    create_topic,
    dlq_json_file_sink,
    produce,
    unique,
    wait_for,
)
from tests.integration.strimzi_env import StrimziNamespace
from tests.integration.test_guardrails import POISON, Setup, daemon_setup, good

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
REPO = Path(__file__).resolve().parents[2]
TOKEN_FILE = f"{POD_SERVICE_ACCOUNT}/token"


class Pod:
    """What a pod of offsetd's Deployment is given: the projected folder and the environment."""

    def __init__(self, ns: StrimziNamespace, tmp: Path) -> None:
        info = ns.kube.info()
        self.ns, self.tmp, self.url = ns, tmp, info.url
        self.ca = Path(info.run_dir) / "pki" / "serving" / "apiserver.crt"
        self.folder = ProjectedFolder(tmp / "serviceaccount", self.ca.read_bytes(), ns.namespace)
        (tmp / "home").mkdir(parents=True)
        split = urlsplit(info.url)
        self.env = {
            "KUBERNETES_SERVICE_HOST": str(split.hostname),
            "KUBERNETES_SERVICE_PORT": str(split.port),
            "KUBECONFIG": "",
            "HOME": str(tmp / "home"),
        }
        self._runs = 0

    def token(self, secret: str) -> str:
        return bound_token(self.ns.admin, self.ns.namespace, "offsetd", secret)

    def revoke(self, secret: str) -> None:
        self.ns.admin.delete(Secret, secret, namespace=self.ns.namespace)

    def wrap(self, argv: list[str]) -> list[str]:
        self._runs += 1
        return in_pod_argv(self.folder.path, self.tmp / f"scratch-{self._runs}", argv)

    def answer(self, token: str) -> int:
        """The API server's status for a read the Role allows, with `token` (as kubectl sends
        it)."""
        path = f"apis/kafka.strimzi.io/{self.ns.version}/namespaces/{self.ns.namespace}"
        response = httpx.get(
            f"{self.url}/{path}/kafkaconnects",
            headers={"Authorization": f"Bearer {token}"},
            verify=ssl.create_default_context(cafile=str(self.ca)),
            timeout=10,
        )
        return response.status_code

    def offsetd(self, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """`offsetd <args>` in the pod's place (a process of its own: its own mounts)."""
        argv = [sys.executable, "-m", "offsetd", *leaf_argv(config, args)]
        return subprocess.run(
            self.wrap(argv),
            env={**os.environ, **self.env},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _pause_rule(folder: Path, prefix: str) -> None:
    """Pause a sink of this test at its first DLQ record (one spec.state patch, no saga)."""
    for old in folder.glob("*.yaml"):
        old.unlink()
    rule = {
        "name": "login-pause",
        "description": "Pause this test's sink at its first DLQ record.",
        "mode": "enforce",
        "match": {"kind": "dlq_record", "connector": f"{prefix}-*"},
        "when": {"count": 1, "within": "10m", "key": ["connector"]},
        "actions": [{"type": "pause"}],
        "limits": {"budget": {"max": 100, "per": "1h"}, "cooldown": "0s"},
    }
    with (folder / "login-pause.yaml").open("w") as out:
        YAML().dump(rule, out)


def _sink(ns: StrimziNamespace, connect: ConnectClient, setup: Setup, suffix: str) -> str:
    topic = unique(f"{setup.prefix}-{suffix}")
    create_topic(setup.west, topic)
    name = f"{setup.prefix}-{suffix}".lower()
    ns.connector(name, dlq_json_file_sink(topic, setup.tmp / f"{name}.txt", setup.dlq))
    connect.wait_running(name)
    produce(setup.west, topic, good(range(3)))
    return topic


def _patched_by_offsetd(ns: StrimziNamespace, name: str) -> datetime:
    """When field manager `offsetd` last wrote the KafkaConnector's spec.state (paused)."""
    doc = ns.get("KafkaConnector", name)
    assert doc["spec"].get("state") == "paused", doc["spec"]
    entries = [
        m
        for m in doc["metadata"].get("managedFields") or []
        if m.get("manager") == "offsetd"
        and "f:state" in (m.get("fieldsV1") or {}).get("f:spec", {})
    ]
    assert len(entries) == 1, doc["metadata"].get("managedFields")
    return datetime.fromisoformat(entries[0]["time"].replace("Z", "+00:00"))


def _repeated_after_401(log: str, api: str) -> int:
    """How many of the daemon's API requests were answered 401 (httpx logs each answer); each
    must be followed by the same request answered 200: the one repeat with the file read again."""
    lines = [line for line in log.splitlines() if "HTTP Request:" in line and api in line]
    refused = 0
    for i, line in enumerate(lines):
        if '"HTTP/1.1 401 Unauthorized"' in line:
            refused += 1
            request = line.split("HTTP Request:", 1)[1].rsplit('"HTTP/1.1', 1)[0]
            assert i + 1 < len(lines), line
            assert request in lines[i + 1], (line, lines[i + 1])
            assert '"HTTP/1.1 200 OK"' in lines[i + 1], (line, lines[i + 1])
    return refused


def _refusals(ns: StrimziNamespace) -> Callable[[], int]:
    log = Path(ns.kube.info().run_dir) / "logs" / "kube-apiserver.log"
    return lambda: log.read_text(errors="replace").count("Unable to authenticate the request")


def test_the_daemon_and_the_cli_log_in_with_the_pods_token_and_take_up_its_rotation(
    stack: StackInfo, connect: ConnectClient, tmp_path: Path, strimzi_ns: Any
) -> None:
    ns: StrimziNamespace = strimzi_ns(interval_s=2.0)
    pod = Pod(ns, tmp_path / "pod")
    token_a = pod.token("offsetd-token-a")
    pod.folder.write(token_a)
    remediation = {"blast_radius": {"max_failing_connectors": 100, "settle": "0s"}}
    access = {"operator_timeout": "60s"}  # no namespace, no kubeconfig: the pod's own
    with daemon_setup(
        stack, tmp_path, mode="enforce", remediation=remediation, strimzi=access
    ) as setup:
        _pause_rule(tmp_path / "rules", setup.prefix)
        before, after = _sink(ns, connect, setup, "a"), _sink(ns, connect, setup, "b")
        last = _sink(ns, connect, setup, "c")
        name_a, name_b = f"{setup.prefix}-a".lower(), f"{setup.prefix}-b".lower()
        name_c = f"{setup.prefix}-c".lower()
        setup.start(env=pod.env, wrap=pod.wrap)

        produce(setup.west, before, [POISON])
        setup.wait_outcome(name_a, "executed", timeout_s=120)
        _patched_by_offsetd(ns, name_a)

        rotated = datetime.now(UTC).replace(microsecond=0)
        token_b = pod.token("offsetd-token-b")
        pod.folder.write(token_b)
        status = pod.answer(token_a)
        assert status == 200  # A still works until its Secret goes
        pod.revoke("offsetd-token-a")
        wait_for("the API server to refuse token A", lambda: pod.answer(token_a) == 401, 30)
        refused = _refusals(ns)
        seen = refused()

        produce(setup.west, after, [POISON])
        done = setup.wait_outcome(name_b, "executed", timeout_s=120)
        assert _patched_by_offsetd(ns, name_b) >= rotated, done
        # The daemon's client still held token A: the API server refused it once more, and the
        # request was repeated with the file read again (nothing failed for good).
        assert refused() > seen
        outcomes = [r["outcome"] for n in (name_a, name_b) for r in setup.outcomes(n)]
        assert outcomes == ["executed", "executed"], outcomes
        assert setup.daemon is not None
        log = setup.daemon.log()
        assert _repeated_after_401(log, pod.url) >= 1, log[-3000:]
        assert "KubernetesError" not in log, log[-3000:]
        assert token_a not in log
        assert token_b not in log

        listed = pod.offsetd(setup.config, "offsets", "list", name_a, "--output", "json")
        assert listed.returncode == 0, listed.stderr[-3000:]
        assert json.loads(listed.stdout), listed.stdout
        assert ns.configmap(f"{name_a}-offsetd-list-offsets") is not None  # through Strimzi

        # Revoked and not rotated (B revoked too, the file holding revoked A): one line naming
        # the token file, never the token.
        pod.folder.write(token_a)
        pod.revoke("offsetd-token-b")
        wait_for("the API server to refuse token B", lambda: pod.answer(token_b) == 401, 30)
        stale = pod.offsetd(setup.config, "offsets", "list", name_a)
        assert stale.returncode == 56, stale.stdout + stale.stderr
        lines = stale.stderr.strip().splitlines()
        assert len(lines) == 1, stale.stderr
        assert TOKEN_FILE in lines[0], lines
        assert "Traceback" not in stale.stderr
        assert token_a not in stale.stdout + stale.stderr
        print(f"the refused CLI said: {lines[0]}")

        # The daemon, its token revoked and not rotated: the action fails naming the file.
        produce(setup.west, last, [POISON])
        failed = setup.wait_outcome(name_c, "failed", timeout_s=120)
        print(f"the refused daemon's outcome: {failed.get('message')}")
        assert TOKEN_FILE in str(failed.get("message")), failed
        log = setup.daemon.log()
        assert token_a not in log
        assert token_b not in log
        assert "Traceback" not in log, log[-3000:]
        assert setup.daemon.proc is not None
        assert setup.daemon.proc.poll() is None  # it keeps running, and says why it cannot act
