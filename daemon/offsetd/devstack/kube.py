"""A real Kubernetes API on loopback: etcd and kube-apiserver, Strimzi's CRDs, offsetd's Role.

The API server runs with the RBAC authorizer, a static admin token (group system:masters) and a
service-account signing key, so tokens for service accounts are issued by the TokenRequest API
exactly as in a cluster. Nothing else of Kubernetes runs: no scheduler, no controller manager,
no kubelet — offsetd only talks to the API, and the Strimzi stand-in
(`offsetd.devstack.strimzi_standin`) plays the operator.

Two kubeconfigs are written into the run folder: `admin.kubeconfig` (the stand-in and the set-up
use it) and `offsetd.kubeconfig`, a token of service account `offsetd` bound to exactly the Role
in `deploy/kubernetes/offsetd-role.yaml`: what offsetd is given in a real namespace.
"""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import httpx
from lightkube import ApiError, Client, KubeConfig, codecs
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding

from offsetd.devstack import procs
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import find_pom
from offsetd.devstack.kubebin import ensure_etcd, ensure_kube_apiserver
from offsetd.devstack.ports import HOST

__all__ = ["CRD_VERSIONS", "KubeCluster", "KubeInfo"]

# Strimzi release of the CRDs -> the kafka.strimzi.io version it serves
CRD_VERSIONS = {"1.2.0": "v1", "0.45.0": "v1beta2"}
_CRD_FILES = ("041-Crd-kafkaconnect.yaml", "047-Crd-kafkaconnector.yaml",
              "048-Crd-kafkamirrormaker2.yaml")  # fmt: skip
_FIELD_MANAGER = "offsetd-devstack"
_TOKEN_SECONDS = 7 * 24 * 3600


@dataclass
class KubeInfo:
    """A running API server, as `stack.json` and the tests see it."""

    url: str
    namespace: str
    strimzi_release: str
    strimzi_api: str
    admin_kubeconfig: str
    offsetd_kubeconfig: str
    run_dir: str


def _source_root() -> Path:
    return find_pom().parents[3]


def crd_dir(release: str) -> Path:
    return _source_root() / "deploy" / "local" / "k8s-strimzi-crds" / release


def role_file() -> Path:
    return _source_root() / "deploy" / "kubernetes" / "offsetd-role.yaml"


class KubeCluster:
    """etcd + kube-apiserver in `<run_dir>`; its processes are recorded like the stack's."""

    def __init__(self, run_dir: Path, log: Any = lambda _msg: None) -> None:
        self.run_dir = run_dir.resolve()
        self.log = log
        self._procs_file = self.run_dir / "processes.json"
        self._info_file = self.run_dir / "kube.json"
        self._records: list[procs.ProcessRecord] = []

    def info(self) -> KubeInfo:
        return KubeInfo(**json.loads(self._info_file.read_text()))

    def running(self) -> bool:
        return self._info_file.exists() and any(
            r.matches_live_process() for r in procs.load(self._procs_file)
        )

    def up(
        self,
        ports: list[int],
        *,
        strimzi_release: str = "1.2.0",
        namespace: str = "kafka",
        timeout_s: float = 120,
    ) -> KubeInfo:
        """Start etcd and the API server on three loopback ports; set up CRDs, Role, tokens."""
        if strimzi_release not in CRD_VERSIONS:
            raise DevStackError(
                f"no Strimzi CRDs for {strimzi_release}: choose one of {sorted(CRD_VERSIONS)}"
            )
        etcd, apiserver = ensure_etcd(log=self.log), ensure_kube_apiserver(log=self.log)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("etcd", "pki", "logs"):
            path = self.run_dir / sub
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
        started = time.monotonic()
        try:
            info = self._start(etcd, apiserver, ports, strimzi_release, namespace, timeout_s)
        except BaseException:
            self.down()
            raise
        self.log(f"Kubernetes API ready on {info.url} in {time.monotonic() - started:.1f} s")
        self._info_file.write_text(json.dumps(asdict(info), indent=2))
        return info

    def admin_client(self) -> Client:
        return Client(
            config=KubeConfig.from_file(self.info().admin_kubeconfig), field_manager=_FIELD_MANAGER
        )

    def grant(self, namespace: str, verbs_without: tuple[str, ...] = ()) -> Path:
        """A namespace with a service account bound to the shipped Role; its kubeconfig (what
        a test gives offsetd: exactly the Role's rights, never admin). `verbs_without`: a
        second account whose copy of the Role lacks those verbs."""
        info = self.info()
        client = self.admin_client()
        account = "offsetd" if not verbs_without else "offsetd-without-" + "-".join(verbs_without)
        try:
            token = _offsetd_account(client, namespace, account, verbs_without)
        finally:
            client.close()
        ca = Path(info.run_dir) / "pki" / "serving" / "apiserver.crt"
        return self._write_kubeconfig(f"{account}-{namespace}", info.url, ca, token, namespace)

    def kubeconfig_for(self, namespace: str, account: str) -> Path:
        """A kubeconfig with a fresh token of an existing service account (one a chart made,
        for example): exactly the rights bound to it."""
        info = self.info()
        client = self.admin_client()
        try:
            token = _token(client, namespace, account)
        finally:
            client.close()
        ca = Path(info.run_dir) / "pki" / "serving" / "apiserver.crt"
        return self._write_kubeconfig(f"{account}-{namespace}", info.url, ca, token, namespace)

    def down(self) -> list[str]:
        stopped = procs.stop(list(reversed(procs.load(self._procs_file))))
        self._procs_file.unlink(missing_ok=True)
        self._info_file.unlink(missing_ok=True)
        return stopped

    # -- internals ----------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> procs.ProcessRecord:
        record = procs.spawn(name, argv, self.run_dir / "logs" / f"{name}.log", self.run_dir)
        self._records.append(record)
        procs.save(self._records, self._procs_file)
        return record

    def _start(
        self,
        etcd: Path,
        apiserver: Path,
        ports: list[int],
        release: str,
        namespace: str,
        timeout_s: float,
    ) -> KubeInfo:
        client_port, peer_port, api_port = ports
        deadline = time.monotonic() + timeout_s
        pki = self.run_dir / "pki"
        etcd_url = f"http://{HOST}:{client_port}"
        etcd_record = self._spawn(
            "etcd",
            [
                str(etcd),
                "--name=offsetd-dev",
                f"--data-dir={self.run_dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://{HOST}:{peer_port}",
                f"--initial-advertise-peer-urls=http://{HOST}:{peer_port}",
                f"--initial-cluster=offsetd-dev=http://{HOST}:{peer_port}",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", etcd_record, deadline, lambda: _etcd_healthy(etcd_url))
        admin_token = secrets.token_urlsafe(32)
        tokens = pki / "tokens.csv"
        tokens.write_text(f"{admin_token},admin,admin,system:masters\n")
        tokens.chmod(0o600)
        _signing_key(pki)
        url = f"https://{HOST}:{api_port}"
        api_record = self._spawn(
            "kube-apiserver",
            [
                str(apiserver),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={api_port}",
                f"--cert-dir={pki / 'serving'}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={tokens}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.96.0.0/24",
                "--profiling=false",
                "--v=1",
            ],
        )
        ca = pki / "serving" / "apiserver.crt"
        self._wait("kube-apiserver", api_record, deadline, lambda: _api_ready(url, ca, admin_token))
        admin = self._write_kubeconfig("admin", url, ca, admin_token, namespace)
        client = Client(config=KubeConfig.from_file(admin), field_manager=_FIELD_MANAGER)
        try:
            self._apply_crds(client, release, deadline)
            token = _offsetd_account(client, namespace)
        finally:
            client.close()
        offsetd = self._write_kubeconfig("offsetd", url, ca, token, namespace)
        return KubeInfo(
            url=url,
            namespace=namespace,
            strimzi_release=release,
            strimzi_api=CRD_VERSIONS[release],
            admin_kubeconfig=str(admin),
            offsetd_kubeconfig=str(offsetd),
            run_dir=str(self.run_dir),
        )

    def _write_kubeconfig(self, user: str, url: str, ca: Path, token: str, ns: str) -> Path:
        path = self.run_dir / f"{user}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "offsetd-dev", "cluster": {"server": url,
                                                              "certificate-authority": str(ca)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "offsetd-dev", "user": user,
                                                    "namespace": ns}}],
            "current-context": user,
        }  # fmt: skip
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML: kubectl reads it
        path.chmod(0o600)
        return path

    def _apply_crds(self, client: Client, release: str, deadline: float) -> None:
        names = []
        for file in _CRD_FILES:
            with (crd_dir(release) / file).open() as stream:
                for obj in codecs.load_all_yaml(stream):
                    client.apply(obj, force=True)
                    names.append(str(obj.metadata.name))  # type: ignore[union-attr]
        for name in names:
            while not _established(client.get(CustomResourceDefinition, name)):
                if time.monotonic() > deadline:
                    raise DevStackError(f"CRD {name} was not established in time")
                time.sleep(0.2)

    def _wait(self, what: str, record: procs.ProcessRecord, deadline: float, ready: Any) -> None:
        while True:
            if procs.exited(record):
                tail = Path(record.log).read_text(errors="replace").strip().splitlines()[-3:]
                raise DevStackError(f"{what} exited during start-up ({' | '.join(tail)[:300]})")
            try:
                if ready():
                    return
            except (httpx.HTTPError, OSError):
                pass
            if time.monotonic() > deadline:
                raise DevStackError(f"{what} was not ready in time; see {record.log}")
            time.sleep(0.3)


def _etcd_healthy(url: str) -> bool:
    return bool(httpx.get(f"{url}/health", timeout=2).json().get("health") == "true")


def _api_ready(url: str, ca: Path, token: str) -> bool:
    if not ca.exists():
        return False
    response = httpx.get(
        f"{url}/readyz",
        verify=ssl.create_default_context(cafile=str(ca)),
        headers={"Authorization": f"Bearer {token}"},
        timeout=3,
    )
    return response.status_code == 200


def _signing_key(pki: Path) -> None:
    key, pub = pki / "sa.key", pki / "sa.pub"
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
         "-out", str(key)],
        check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)],
        check=True,
        capture_output=True,
    )


def _established(crd: CustomResourceDefinition) -> bool:
    conditions = (crd.status.conditions if crd.status else None) or []
    return any(c.type == "Established" and c.status == "True" for c in conditions)


def _offsetd_account(
    client: Client,
    namespace: str,
    account: str = "offsetd",
    verbs_without: tuple[str, ...] = (),
) -> str:
    """Namespace, a service account, the shipped Role (less `verbs_without`) bound to it; a
    token for it."""
    try:
        client.create(Namespace(metadata=ObjectMeta(name=namespace)))
    except ApiError as exc:
        if exc.status.code != 409:
            raise
    client.apply(ServiceAccount(metadata=ObjectMeta(name=account, namespace=namespace)), force=True)
    with role_file().open() as stream:
        role = cast(Role, codecs.load_all_yaml(stream)[0])
    role.metadata = ObjectMeta(name=account, namespace=namespace)
    for rule in role.rules or []:
        rule.verbs = [v for v in rule.verbs if v not in verbs_without]
    client.apply(role, force=True)
    binding = {
        "metadata": {"name": account, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
    }
    client.apply(cast(RoleBinding, RoleBinding.from_dict(binding)), force=True)
    return _token(client, namespace, account)


def _token(client: Client, namespace: str, account: str) -> str:
    """A token of an existing service account, from the TokenRequest API (as a pod gets one)."""
    spec = TokenRequestSpec(audiences=[], expirationSeconds=_TOKEN_SECONDS)
    issued = client.create(ServiceAccount.Token(metadata=ObjectMeta(), spec=spec), account,
                           namespace=namespace)  # fmt: skip
    token = issued.status.token if issued.status else None
    if not token:
        raise DevStackError(f"the API server issued no token for service account {account}")
    return token
