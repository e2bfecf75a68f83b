"""The kubelet's part of a pod's login, for offsetd run outside a cluster: the projected
service-account folder, its token rotation, and a process that sees it where a pod does.

- `ProjectedFolder` writes `token`, `ca.crt` and `namespace` exactly as the kubelet's atomic
  writer lays out a projected volume: each file a symlink `token -> ..data/token`, `..data` a
  symlink to a folder `..<timestamp>`; a rotation writes a new timestamped folder and swaps
  `..data` with one `rename` (atomic: a reader sees the old token or the new one, never none),
  then removes the old folder.
- `bound_token` asks the TokenRequest API for a token bound to an object (a Secret): the API
  server refuses it once that object is deleted, as it refuses a pod's token once the pod is
  gone — the way to make a token invalid before its 10-minute minimum lifetime ends.
- `in_pod_argv` runs a command in a private mount namespace (root, `unshare`) in which the
  folder is mounted read-only at `/var/run/secrets/kubernetes.io/serviceaccount`, over an
  overlay of `/run` (so nothing of the host changes and nothing else sees it).
"""

from __future__ import annotations

import os
import shlex
import shutil
from datetime import UTC, datetime
from pathlib import Path

from lightkube import Client
from lightkube.models.authentication_v1 import BoundObjectReference, TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Secret, ServiceAccount

from offsetd.devstack.errors import DevStackError

__all__ = ["POD_SERVICE_ACCOUNT", "ProjectedFolder", "bound_token", "in_pod_argv"]

POD_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_FILES = ("token", "ca.crt", "namespace")


class ProjectedFolder:
    """A service-account folder as the kubelet writes it, in `path` (see the module)."""

    def __init__(self, path: Path, ca: bytes, namespace: str) -> None:
        self.path, self._ca, self._namespace = path, ca, namespace

    def write(self, token: str) -> Path:
        """The first token, or a rotation to a new one; the new timestamped folder."""
        self.path.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
        folder = self.path / stamp
        folder.mkdir()
        contents = {
            "token": token.encode(),
            "ca.crt": self._ca,
            "namespace": self._namespace.encode(),
        }
        for name, data in contents.items():
            (folder / name).write_bytes(data)
            (folder / name).chmod(0o644)
        data_link, before = self.path / "..data", self.current()
        tmp = self.path / "..data_tmp"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(stamp)
        os.rename(tmp, data_link)  # the atomic swap
        for name in _FILES:
            link = self.path / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")
        if before is not None:
            shutil.rmtree(before)
        return folder

    def current(self) -> Path | None:
        """The folder `..data` points at (None before the first write)."""
        link = self.path / "..data"
        return self.path / os.readlink(link) if link.is_symlink() else None


def bound_token(client: Client, namespace: str, account: str, secret: str) -> str:
    """A token of `account`, bound to a Secret `secret` made for it (10 minutes, the least the
    API allows): deleting the Secret revokes the token."""
    made = client.create(Secret(metadata=ObjectMeta(name=secret, namespace=namespace)))
    uid = made.metadata.uid if made.metadata else None
    ref = BoundObjectReference(kind="Secret", apiVersion="v1", name=secret, uid=uid)
    spec = TokenRequestSpec(audiences=[], expirationSeconds=600, boundObjectRef=ref)
    issued = client.create(ServiceAccount.Token(metadata=ObjectMeta(), spec=spec), account,
                           namespace=namespace)  # fmt: skip
    token = issued.status.token if issued.status else None
    if not token:
        raise DevStackError(f"the API server issued no token for service account {account}")
    return token


def in_pod_argv(folder: Path, scratch: Path, argv: list[str]) -> list[str]:
    """`argv` in a private mount namespace where `folder` is the pod's service-account folder
    (read-only, as the kubelet mounts it); `scratch` (an empty folder) holds the overlay's
    writable layer, on a tmpfs of that namespace."""
    if shutil.which("unshare") is None:
        raise DevStackError("unshare (util-linux) is needed to give a process a pod's token path")
    if os.geteuid() != 0:
        raise DevStackError("a private mount namespace needs root (unshare --mount)")
    scratch.mkdir(parents=True, exist_ok=True)
    target, s = POD_SERVICE_ACCOUNT, shlex.quote(str(scratch))
    layers = f"lowerdir=/run,upperdir={s}/upper,workdir={s}/work"
    script = " && ".join(
        [
            f"mount -t tmpfs offsetd-pod {s}",
            f"mkdir {s}/upper {s}/work",
            f"mount -t overlay offsetd-pod -o {layers} /run",
            f"mkdir -p {target}",
            f"mount --bind {shlex.quote(str(folder))} {target}",
            f"mount -o remount,bind,ro {target}",
            'exec "$@"',
        ]
    )
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *argv]
