"""Where offsetd's Kubernetes credentials come from (offsetd.kube.login), and the contract of
the installed lightkube it relies on for a rotated in-cluster token: the token file is read
again on a 401 and the request repeated once. The API server here is an httpx2 MockTransport
that accepts only the token currently in the file: a fake of the server's one answer that
matters, so that a lightkube that stops doing this fails here and not in a pod an hour after
its start (the real API server proves the same in tests/integration/test_strimzi_in_cluster).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import certifi
import httpx2
import pytest
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import ConfigMap

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.devstack.kubelet import ProjectedFolder
from offsetd.errors import KubernetesError
from offsetd.kube.login import Login, load_login, refused


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ProjectedFolder:
    """No kubeconfig anywhere; a pod's service-account folder and its environment."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    folder = ProjectedFolder(tmp_path / "sa", Path(certifi.where()).read_bytes(), "team-a")
    folder.write("token-a")
    return folder


def _kubeconfig(path: Path, namespace: str | None) -> Path:
    context: dict[str, str] = {"cluster": "c", "user": "u"}
    if namespace is not None:
        context["namespace"] = namespace
    path.write_text(
        json.dumps(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://k.example:6443"}}],
                "users": [{"name": "u", "user": {"token": "kubeconfig-token"}}],
                "contexts": [{"name": "ctx", "context": context}],
                "current-context": "ctx",
            }
        )
    )
    return path


def test_in_cluster_the_namespace_file_is_the_default_namespace(pod: ProjectedFolder) -> None:
    login = load_login(StrimziAccess(), pod.path)
    assert login.namespace == "team-a"
    assert login.token_file == pod.path / "token"
    assert login.config.cluster.server == "https://10.96.0.1:443"
    assert login.source == f"the service-account token {pod.path / 'token'}"


def test_in_cluster_a_configured_namespace_wins(pod: ProjectedFolder) -> None:
    assert load_login(StrimziAccess(namespace="kafka"), pod.path).namespace == "kafka"


def test_a_kubeconfig_wins_over_the_pods_token_and_gives_its_contexts_namespace(
    pod: ProjectedFolder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_config = tmp_path / "home" / ".kube" / "config"
    home_config.parent.mkdir(parents=True)
    _kubeconfig(home_config, "from-home")
    assert load_login(StrimziAccess(), pod.path).namespace == "from-home"
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "env.kubeconfig", None)))
    login = load_login(StrimziAccess(), pod.path)
    assert (login.namespace, login.token_file) == ("default", None)
    given = _kubeconfig(tmp_path / "given.kubeconfig", "given")
    login = load_login(StrimziAccess(kubeconfig=given), pod.path)
    assert (login.namespace, login.source) == ("given", f"the kubeconfig {given}")


def test_no_token_and_no_kubeconfig_is_one_line_naming_the_token_file(
    pod: ProjectedFolder, tmp_path: Path
) -> None:
    with pytest.raises(KubernetesError) as caught:
        load_login(StrimziAccess(), tmp_path / "nothing")
    message = str(caught.value)
    assert str(tmp_path / "nothing" / "token") in message
    assert "\n" not in message
    assert "automountServiceAccountToken" in message


def test_a_token_without_the_service_environment_names_the_missing_variables(
    pod: ProjectedFolder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT")
    with pytest.raises(KubernetesError, match="KUBERNETES_SERVICE_PORT is not set"):
        load_login(StrimziAccess(), pod.path)


def test_a_context_without_a_kubeconfig_is_refused(pod: ProjectedFolder) -> None:
    with pytest.raises(KubernetesError, match=r"strimzi\.context"):
        load_login(StrimziAccess(context="prod"), pod.path)


def test_a_refused_token_names_the_file_and_never_the_token(pod: ProjectedFolder) -> None:
    login = load_login(StrimziAccess(), pod.path)
    error = refused(login, "get", "kafkaconnectors.kafka.strimzi.io s1", "Unauthorized")
    message = str(error)
    assert str(pod.path / "token") in message
    assert "token-a" not in message
    assert (error.status, error.retriable) == (401, False)
    assert "\n" not in message


def test_a_refused_kubeconfig_names_the_kubeconfig(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "k", "ns")
    login = load_login(StrimziAccess(kubeconfig=path))
    assert isinstance(login, Login)
    message = str(refused(login, "list", "kafkaconnects", "Unauthorized"))
    assert f"the kubeconfig {path}" in message
    assert "kubeconfig-token" not in message


def _server(seen: list[str], accepted: list[str]) -> httpx2.MockTransport:
    def answer(request: httpx2.Request) -> httpx2.Response:
        bearer = request.headers.get("authorization", "")
        seen.append(bearer.removeprefix("Bearer "))
        if bearer != f"Bearer {accepted[0]}":
            return httpx2.Response(401, json={"kind": "Status", "code": 401,
                                              "message": "Unauthorized"})  # fmt: skip
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        return httpx2.Response(200, json=body)

    return httpx2.MockTransport(answer)


def test_lightkube_reads_a_rotated_token_file_again_on_a_401_and_repeats_once(
    pod: ProjectedFolder,
) -> None:
    login = load_login(StrimziAccess(), pod.path)
    seen: list[str] = []
    accepted = ["token-a"]

    async def calls() -> None:
        client = AsyncClient(config=login.config, transport=_server(seen, accepted))
        await client.get(ConfigMap, "c", namespace="x")
        pod.write("token-b")  # the kubelet rotates; the server stops accepting token-a
        accepted[0] = "token-b"
        await client.get(ConfigMap, "c", namespace="x")
        await client.get(ConfigMap, "c", namespace="x")
        accepted[0] = "token-c"  # revoked, and not rotated: refused after one more read
        with pytest.raises(ApiError) as caught:
            await client.get(ConfigMap, "c", namespace="x")
        assert caught.value.status.code == 401

    asyncio.run(calls())
    assert seen == ["token-a", "token-a", "token-b", "token-b", "token-b", "token-b"]
