"""The pinned binaries of the local Kubernetes API: kube-apiserver built from the Go module proxy,
etcd from Debian's package; and Helm (the chart's tests), also built from the Go module proxy.

No registry reachable here ships kube-apiserver, so it is built with the ordinary `go` client: a
wrapper module requires `k8s.io/kubernetes` at the pinned version and replaces each staging module
(`k8s.io/* v0.0.0` in that version's go.mod) with its published `v0.Y.Z`; `k8s.io/utils` and
`k8s.io/kube-openapi` keep the versions kubernetes names. The build takes about ten minutes on two
loaded cores, so the result is cached under the user's cache folder keyed by version, built by
`scripts/bootstrap`, and never committed. etcd is Debian's `etcd-server`, unpacked (not installed
as a service) into the same cache.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import require_tool
from offsetd.jarcache import cache_root

__all__ = [
    "ETCD_DEB_VERSION",
    "HELM_VERSION",
    "KUBE_VERSION",
    "binaries_root",
    "build_lock",
    "ensure_etcd",
    "ensure_helm",
    "ensure_kube_apiserver",
    "run_tool",
    "staging_replaces",
    "version_stamp",
]

KUBE_VERSION = "v1.33.4"
ETCD_DEB_VERSION = "3.4.23-4+b4"  # Debian bookworm's etcd-server
HELM_VERSION = "v4.3.1"
_STAGING_RE = re.compile(r"^\s+(k8s\.io/[A-Za-z0-9._/-]+) v0\.0\.0$", re.MULTILINE)
_BUILD_TIMEOUT_S = 3600
_APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"


def binaries_root() -> Path:
    """`$OFFSETD_BIN_CACHE`, else `<cache>/offsetd/bin` (next to the jar cache)."""
    env = os.environ.get("OFFSETD_BIN_CACHE")
    return Path(env) if env else cache_root().parent / "bin"


def staging_replaces(kubernetes_go_mod: str, version: str) -> list[str]:
    """One `replace` line per staging module of kubernetes' go.mod: `v0.0.0` -> `v0.Y.Z`."""
    published = "v0." + version.removeprefix("v").split(".", 1)[1]
    return [
        f"replace {module} => {module} {published}"
        for module in sorted(set(_STAGING_RE.findall(kubernetes_go_mod)))
    ]


def version_stamp(version: str) -> str:
    """The linker flags `make` sets in a kubernetes release build: without them /version says
    v0.0.0-master, and clients that check the server's version (`helm` against a chart's
    kubeVersion) refuse it."""
    major, minor = version.removeprefix("v").split(".")[:2]
    package = "k8s.io/component-base/version"
    return " ".join(
        f"-X {package}.{name}={value}"
        for name, value in (
            ("gitVersion", version),
            ("gitMajor", major),
            ("gitMinor", minor),
            ("gitTreeState", "clean"),
        )
    )


def ensure_kube_apiserver(
    version: str = KUBE_VERSION, log: Callable[[str], None] = lambda _msg: None
) -> Path:
    """The cached kube-apiserver of `version`, built the first time (about ten minutes)."""
    # "-2": the build recipe's revision (2: version stamped), so an older build is not reused
    target = binaries_root() / "kube-apiserver" / f"{version}-2" / "kube-apiserver"
    if target.is_file():
        return target
    with build_lock(target):
        if not target.is_file():
            _build_kube_apiserver(version, target, log)
    return target


def _build_kube_apiserver(version: str, target: Path, log: Callable[[str], None]) -> None:
    go = require_tool("go", "install Go 1.24 or newer (the kube-apiserver build needs it)")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    log(f"building kube-apiserver {version} from the Go module proxy (once, about 10 minutes)")
    with tempfile.TemporaryDirectory(prefix="kube-apiserver-", dir=target.parent) as tmp:
        work = Path(tmp)
        info = json.loads(
            run_tool([go, "mod", "download", "-json", f"k8s.io/kubernetes@{version}"], work, env)
        )
        kubernetes_mod = Path(info["GoMod"]).read_text()
        replaces = staging_replaces(kubernetes_mod, version)
        if not replaces:
            raise DevStackError(f"k8s.io/kubernetes {version} names no staging modules")
        (work / "go.mod").write_text(
            "module offsetd.local/kubeapiserver\n\ngo 1.24\n\n"
            f"require k8s.io/kubernetes {version}\n\n" + "\n".join(replaces) + "\n"
        )
        run_tool([go, "get", f"k8s.io/kubernetes/cmd/kube-apiserver@{version}"], work, env)
        built = work / "kube-apiserver"
        run_tool(
            [
                go,
                "build",
                "-trimpath",
                "-pgo=off",
                f"-ldflags={version_stamp(version)}",
                "-o",
                str(built),
                _APISERVER_PACKAGE,
            ],
            work,
            env,
        )
        built.replace(target)  # same folder's filesystem: atomic, never a half-written binary


def ensure_helm(
    version: str = HELM_VERSION, log: Callable[[str], None] = lambda _msg: None
) -> Path:
    """The cached `helm` of `version`, built the first time with `go install` (about a minute
    and a half; helm's go.mod has no replace directive, so no wrapper module is needed)."""
    target = binaries_root() / "helm" / version / "helm"
    if target.is_file():
        return target
    with build_lock(target):
        if not target.is_file():
            _build_helm(version, target, log)
    return target


def _build_helm(version: str, target: Path, log: Callable[[str], None]) -> None:
    go = require_tool("go", "install Go 1.24 or newer (the helm build needs it)")
    log(f"building helm {version} from the Go module proxy (once, about 2 minutes)")
    with tempfile.TemporaryDirectory(prefix="helm-", dir=target.parent) as tmp:
        env = {**os.environ, "GOTOOLCHAIN": "local", "GOBIN": tmp}
        major = version.split(".", 1)[0]
        stamp = f"-X helm.sh/helm/{major}/internal/version.version={version}"
        run_tool(
            [
                go,
                "install",
                "-trimpath",
                f"-ldflags=-s -w {stamp}",
                f"helm.sh/helm/{major}/cmd/helm@{version}",
            ],
            Path(tmp),
            env,
        )
        (Path(tmp) / "helm").replace(target)


def ensure_etcd(
    deb_version: str = ETCD_DEB_VERSION, log: Callable[[str], None] = lambda _msg: None
) -> Path:
    """Debian's etcd of `deb_version`, unpacked into the cache the first time."""
    root = binaries_root() / "etcd" / deb_version
    etcd = root / "usr" / "bin" / "etcd"
    if etcd.is_file():
        return etcd
    with build_lock(root):
        if not etcd.is_file():
            _fetch_etcd(deb_version, root, log)
    return etcd


def _fetch_etcd(deb_version: str, root: Path, log: Callable[[str], None]) -> None:
    apt_get = require_tool("apt-get", "etcd comes from Debian's etcd-server package")
    dpkg_deb = require_tool("dpkg-deb", "etcd comes from Debian's etcd-server package")
    root.parent.mkdir(parents=True, exist_ok=True)
    log(f"fetching Debian's etcd-server {deb_version}")
    with tempfile.TemporaryDirectory(prefix="etcd-", dir=root.parent) as tmp:
        work = Path(tmp)
        try:
            run_tool([apt_get, "download", f"etcd-server={deb_version}"], work, dict(os.environ))
        except DevStackError:
            run_tool([apt_get, "update", "-qq"], work, dict(os.environ))
            run_tool([apt_get, "download", f"etcd-server={deb_version}"], work, dict(os.environ))
        debs = list(work.glob("etcd-server_*.deb"))
        if not debs:
            raise DevStackError(f"apt-get download etcd-server={deb_version} gave no package")
        unpacked = work / "root"
        run_tool([dpkg_deb, "-x", str(debs[0]), str(unpacked)], work, dict(os.environ))
        shutil.rmtree(root, ignore_errors=True)
        unpacked.replace(root)


@contextlib.contextmanager
def build_lock(target: Path) -> Iterator[None]:
    """One build of `target` at a time across processes (parallel test lanes, a lane and
    `offsetd dev up --k8s`): the second waits for the first, then finds the binary built."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with (target.parent / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_tool(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    """Run a build tool; its stdout, or a DevStackError with the tail of what it said."""
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=_BUILD_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevStackError(f"{' '.join(argv[:3])} failed: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
        raise DevStackError(f"{' '.join(argv[:3])} failed: " + " | ".join(tail))
    return done.stdout
