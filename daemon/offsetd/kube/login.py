"""Where offsetd's Kubernetes credentials come from, and what a refusal of them says.

Three sources, in kubectl's order: the `strimzi.kubeconfig` file (and `context`), else
`$KUBECONFIG` or `~/.kube/config`, else the pod's service account (in-cluster). In a pod the
kubelet mounts a *projected* token at `/var/run/secrets/kubernetes.io/serviceaccount/token`
(a symlink through `..data` to a timestamped folder, swapped atomically when it rotates the
bound token, at 80 % of its lifetime). lightkube (>= 1.0.1) reads that file through
`BearerTokenFileAuth`: the token is cached, and a 401 makes it read the file again and repeat
the request once, so a rotated token is taken up without a restart (tests/unit/kube pins that
contract of the installed lightkube; tests/integration/test_strimzi_in_cluster proves it on a
real API server). A token that is refused even after that (expired and not rotated, or
revoked) becomes one line naming the token *file*, never the token.

The namespace: `strimzi.namespace` when the config names one, else the credentials' own: the
pod's namespace (the service account's `namespace` file) in-cluster, the context's namespace
with a kubeconfig (kubectl's `default` when the context names none).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lightkube import ConfigError, KubeConfig
from lightkube.config.kubeconfig import SingleConfig

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.errors import KubernetesError

__all__ = ["SERVICE_ACCOUNT_DIR", "Login", "load_login", "refused"]

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@dataclass(frozen=True)
class Login:
    """Loaded credentials; `source` names where they came from (a path, never a secret)."""

    config: SingleConfig
    namespace: str
    source: str
    token_file: Path | None = None  # in-cluster: the projected token, read again on a 401


def load_login(access: StrimziAccess, service_account: Path = SERVICE_ACCOUNT_DIR) -> Login:
    """The credentials for `access` (see the module's docstring for the order)."""
    kubeconfig = access.kubeconfig
    if kubeconfig is None and os.environ.get("KUBECONFIG"):
        kubeconfig = Path(os.environ["KUBECONFIG"])
    default = Path("~/.kube/config").expanduser()
    if kubeconfig is None and default.is_file():
        kubeconfig = default
    if kubeconfig is not None:
        return _from_kubeconfig(access, kubeconfig)
    return _in_cluster(access, service_account)


def _from_kubeconfig(access: StrimziAccess, path: Path) -> Login:
    try:
        single = KubeConfig.from_file(path).get(context_name=access.context)
    except (ConfigError, KeyError, OSError) as exc:
        raise KubernetesError(f"cannot load Kubernetes credentials from {path}: {exc}") from None
    if single is None:
        raise KubernetesError(
            f"the kubeconfig {path} names no current context: set strimzi.context"
        )
    return Login(single, access.namespace or single.namespace, f"the kubeconfig {path}")


def _in_cluster(access: StrimziAccess, folder: Path) -> Login:
    token = folder / "token"
    if not token.is_file():
        raise KubernetesError(
            f"no Kubernetes credentials: no kubeconfig (strimzi.kubeconfig, $KUBECONFIG, "
            f"~/.kube/config) and no service-account token at {token} (in a pod: is "
            "automountServiceAccountToken off?)"
        )
    names = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        raise KubernetesError(
            f"the service-account token {token} is there but {' and '.join(missing)} is not "
            "set: offsetd finds the API server in a pod through these (or give a kubeconfig)"
        )
    if access.namespace is None and not (folder / "namespace").is_file():
        raise KubernetesError(
            f"no namespace: strimzi.namespace is not set and {folder / 'namespace'} is missing"
        )
    if access.context is not None:
        raise KubernetesError(
            "strimzi.context names a kubeconfig context, but no kubeconfig was found "
            f"(in-cluster login with {token}): set strimzi.kubeconfig or drop strimzi.context"
        )
    try:
        single = KubeConfig.from_service_account(folder).get()
    except (ConfigError, KeyError, OSError) as exc:
        raise KubernetesError(
            f"cannot load the service-account login from {folder}: {exc}"
        ) from None
    assert single is not None  # from_service_account makes exactly one context
    namespace = access.namespace or single.namespace.strip()
    return Login(single, namespace, f"the service-account token {token}", token)


def refused(login: Login, verb: str, what: str, words: str) -> KubernetesError:
    """A 401: the API server did not accept the credentials (lightkube already read an
    in-cluster token file again and repeated the request once)."""
    if login.token_file is not None:
        return KubernetesError(
            f"Kubernetes refused the service-account token in {login.token_file} to {verb} "
            f"{what} (401: {words}), also after reading the file again: the token expired or "
            "was revoked and the kubelet did not rotate it (is the pod's projected token "
            "mounted and its service account still there?)",
            status=401,
        )
    return KubernetesError(
        f"Kubernetes refused the credentials of {login.source} to {verb} {what} (401: "
        f"{words}): the token or certificate expired or was revoked; renew it",
        status=401,
    )
