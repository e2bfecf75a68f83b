"""offsetd's OCI image, built without a container registry: Debian's root filesystem from
`mmdebstrap`, the project's wheel and its locked dependencies installed with the image's own
Python, assembled into an OCI layout by `umoci`.

The `Containerfile` at the repository root is what users build with docker or podman; it needs
`python:3.11-slim-bookworm` from a registry. This module builds the equivalent image from Debian
packages and PyPI alone (both reachable where no registry is), so the image can be built and
started in CI and in sandboxes. Same contract as the Containerfile: `/opt/offsetd` venv on
Debian's python3.11, user 10001, data in `/var/lib/offsetd`, nothing else written at run time.

Two layers, cached apart under the user's cache folder (next to the kube-apiserver cache):

- the base: Debian's root filesystem and the venv with the locked dependencies (a few minutes:
  mmdebstrap and every wheel from PyPI), keyed by the runtime requirements `uv export` reads
  from uv.lock, the Debian suite, the extras and this recipe — rebuilt only when those change;
- the application: offsetd's wheel and, where the host has Rust, the compiled owner path's
  (native/, an abi3 wheel built by maturin for the image's Python and glibc, the host's own)
  installed into that venv (pypa's `installer`, from the host: pip is not in the image) and
  compiled with the image's own Python, a small layer on top (about half a minute), keyed by
  everything that goes into the image, every file of the package and of native/ included. A
  source change rebuilds only this layer.

Why one module of ~600 lines: it is one recipe, and its cache keys must cover exactly what its
steps read (uv.lock, the suite, the extras, the package's files): keys and steps side by side
are how a step that reads something new gets its key changed in the same edit.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from offsetd import __version__
from offsetd.devstack.errors import DevStackError
from offsetd.devstack.jars import require_tool
from offsetd.devstack.kubebin import binaries_root, build_lock, run_tool

__all__ = [
    "APP_DIR",
    "DATA_DIR",
    "DEBIAN_SUITE",
    "IMAGE_GID",
    "IMAGE_UID",
    "ImageInfo",
    "base_key",
    "cache_key",
    "debian_packages",
    "ensure_image",
    "ensure_tools",
    "image_root",
    "image_tag",
    "mmdebstrap_argv",
    "normalize_extras",
    "requirements_argv",
    "umoci_config_args",
    "unpack_image",
    "write_oci_archive",
]

DEBIAN_SUITE = "bookworm"  # python3 is 3.11 there, the same as the Containerfile's base
DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEBIAN_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
APP_DIR = "/opt/offsetd"
DATA_DIR = "/var/lib/offsetd"
CONFIG_PATH = "/etc/offsetd/offsetd.yaml"
IMAGE_UID = IMAGE_GID = 10001
WEB_PORT = 6066
_BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "netbase")
# mmdebstrap's hook that merges /usr itself and installs usr-is-merged; without it apt satisfies
# init-system-helpers' `usrmerge | usr-is-merged` with usrmerge, which drags in perl (50 MB).
_MERGED_USR_HOOKS = Path("/usr/share/mmdebstrap/hooks/merged-usr")
_SPARK_PACKAGES = ("openjdk-17-jre-headless",)
_EXTRA_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_PATH = f"{APP_DIR}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Host settings that steer pip to the package index (a mirror, a proxy); passed into the chroot.
_PIP_PASSTHROUGH = (
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_TRUSTED_HOST",
    "PIP_DEFAULT_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
# Docs, man pages and translations are a third of a minimal Debian; licences stay.
_DPKG_EXCLUDES = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
_HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"


@dataclass(frozen=True)
class ImageInfo:
    """A built image: its OCI layout folder and tag, and what it weighs.

    `size_bytes` is what a registry stores and a pull downloads (the gzip layer blobs);
    `uncompressed_bytes` is what the root filesystem takes on disk (the layer tar streams).
    """

    layout: Path
    tag: str
    size_bytes: int
    uncompressed_bytes: int
    key: str
    extras: tuple[str, ...]

    @property
    def reference(self) -> str:
        """`<layout>:<tag>`, as umoci's `--image` takes it (skopeo/podman: prefix `oci:`)."""
        return f"{self.layout}:{self.tag}"


def image_root() -> Path:
    """`<cache>/offsetd/image`, next to the binaries of the local Kubernetes API."""
    return binaries_root().parent / "image"


def normalize_extras(extras: Iterable[str]) -> tuple[str, ...]:
    """Sorted, unique extras, so `("spark",)` twice is one cache entry."""
    found = tuple(sorted(set(extras)))
    for extra in found:
        if not _EXTRA_RE.match(extra):
            raise DevStackError(f"{extra!r} is not an extra name: use e.g. spark")
    return found


def image_tag(version: str, extras: Iterable[str]) -> str:
    """The version, suffixed by the extras (`0.1.0-spark`): one tag per variant."""
    return "-".join((version, *normalize_extras(extras)))


def cache_key(repo: Path, suite: str, extras: Iterable[str]) -> str:
    """sha256 over every input of the image: the lock, the project metadata, each file of the
    package (path and content; bytecode caches left out) and the Debian suite and extras."""
    digest = hashlib.sha256()

    def feed(label: str, data: bytes) -> None:
        # Length-prefixed so that no two different input sets hash the same byte stream.
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    feed("uv.lock", (repo / "uv.lock").read_bytes())
    feed("pyproject.toml", (repo / "pyproject.toml").read_bytes())
    package = repo / "daemon" / "offsetd"
    if not package.is_dir():
        raise DevStackError(f"{package} is missing: the image is built from a source checkout")
    for path in sorted(package.rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        feed("src/" + path.relative_to(package).as_posix(), path.read_bytes())
    native = repo / "native"  # the compiled owner path, built into the image where Rust is
    if native.is_dir():
        for path in sorted(native.rglob("*")):
            if path.is_dir() or "target" in path.relative_to(native).parts:
                continue
            feed("native/" + path.relative_to(native).as_posix(), path.read_bytes())
    feed("suite", suite.encode())
    feed("extras", ",".join(normalize_extras(extras)).encode())
    return digest.hexdigest()


def base_key(requirements: bytes, suite: str, extras: Iterable[str]) -> str:
    """sha256 over what the base layer is made of: the locked runtime requirements it installs
    (`uv export` of the lock: a change to the dev tools' pins is not a new base), the Debian
    suite and extras, and this recipe (a change to how it is built is a new base)."""
    digest = hashlib.sha256()
    for label, data in (
        ("requirements", requirements),
        ("recipe", Path(__file__).read_bytes()),
        ("suite", suite.encode()),
        ("extras", ",".join(normalize_extras(extras)).encode()),
    ):
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def requirements_argv(uv: str, extras: Iterable[str], output: Path) -> list[str]:
    """`uv export` of the lock's runtime requirements (the extras, no dependency group, not the
    project itself, no header: the output names no path, so it keys the base by content)."""
    argv = [uv, "export", "--frozen", "--no-default-groups", "--no-emit-project", "--no-header"]
    argv += [f"--extra={extra}" for extra in normalize_extras(extras)]
    return [*argv, "--quiet", "--output-file", str(output)]


def debian_packages(extras: Iterable[str]) -> tuple[str, ...]:
    """Debian packages on top of minbase; pyspark needs a JRE, so only the spark variant has
    one (it triples the image)."""
    packages: tuple[str, ...] = _BASE_PACKAGES
    if "spark" in normalize_extras(extras):
        packages += _SPARK_PACKAGES
    return packages


def mmdebstrap_argv(
    mmdebstrap: str, suite: str, extras: Iterable[str], hook: Path, output: Path
) -> list[str]:
    """The mmdebstrap command: minbase + `debian_packages`, no recommends, no docs, the suite
    with its updates and security pockets, `hook` run in the finished tree, a tarball out."""
    argv = [
        mmdebstrap,
        "--mode=root",
        "--variant=minbase",
        "--format=tar",
        f"--hook-dir={_MERGED_USR_HOOKS}",
        "--include=" + ",".join(debian_packages(extras)),
        "--aptopt=APT::Install-Recommends false",
        "--aptopt=Acquire::Languages none",
    ]
    argv += [f"--dpkgopt={option}" for option in _DPKG_EXCLUDES]
    argv += [f'--customize-hook=sh {shlex.quote(str(hook))} "$1"', suite, str(output)]
    argv += [
        f"deb {DEBIAN_MIRROR} {suite} main",
        f"deb {DEBIAN_MIRROR} {suite}-updates main",
        f"deb {DEBIAN_SECURITY_MIRROR} {suite}-security main",
    ]
    return argv


def umoci_config_args(version: str, extras: Iterable[str]) -> list[str]:
    """`umoci config` options: the same entrypoint, user, workdir, env, port and labels as the
    Containerfile, so either image runs with the same command line."""
    env = {
        "PATH": _PATH,
        "HOME": DATA_DIR,
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",  # the root filesystem may be read-only
        "PYTHONUNBUFFERED": "1",
    }
    if "spark" in normalize_extras(extras):
        env["JAVA_HOME"] = "/usr/lib/jvm/java-17-openjdk-amd64"
    labels = {
        "org.opencontainers.image.title": "offsetd",
        "org.opencontainers.image.description": (
            "Event-driven offset automation daemon for Kafka Connect and MirrorMaker 2"
        ),
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.vendor": "offsetd",
        "io.offsetd.image.extras": ",".join(normalize_extras(extras)),
        "io.offsetd.image.builder": "mmdebstrap+umoci",
    }
    args = [
        f"--config.entrypoint={APP_DIR}/bin/offsetd",
        "--config.cmd=run",
        "--config.cmd=--config",
        f"--config.cmd={CONFIG_PATH}",
        f"--config.user={IMAGE_UID}:{IMAGE_GID}",
        f"--config.workingdir={DATA_DIR}",
        f"--config.exposedports={WEB_PORT}/tcp",
        f"--config.volume={DATA_DIR}",
        "--os=linux",
        "--architecture=amd64",
        "--author=offsetd",
    ]
    args += [f"--config.env={name}={value}" for name, value in env.items()]
    args += [f"--config.label={name}={value}" for name, value in labels.items()]
    return args


def ensure_tools(log: Callable[[str], None] = lambda _msg: None) -> tuple[str, str]:
    """mmdebstrap and umoci, installed with apt-get when missing and we are root (as
    scripts/bootstrap does for Java and Maven)."""
    missing = [tool for tool in ("mmdebstrap", "umoci") if shutil.which(tool) is None]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        log(f"installing {' '.join(missing)} with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run_tool(["apt-get", "update", "-qq"], Path("/"), env)
        run_tool(["apt-get", "install", "-y", "-qq", *missing], Path("/"), env)
    hint = "install it (apt-get install mmdebstrap umoci) and retry"
    return require_tool("mmdebstrap", hint), require_tool("umoci", hint)


def ensure_image(
    extras: tuple[str, ...] = (),
    log: Callable[[str], None] = lambda _msg: None,
    *,
    suite: str = DEBIAN_SUITE,
) -> ImageInfo:
    """The cached image for the current sources: its base built the first time for a lock
    (a few minutes), the application layer for each source change (about half a minute)."""
    extras = normalize_extras(extras)
    repo = _repo_root()
    key = cache_key(repo, suite, extras)
    entry = image_root() / key[:24]
    cached = _load_info(entry)
    if cached is not None:
        return cached
    if os.geteuid() != 0:
        raise DevStackError("building the image needs root (mmdebstrap --mode=root, chroot)")
    with build_lock(entry):  # one build at a time: a second caller finds it built
        cached = _load_info(entry)
        if cached is not None:
            return cached
        mmdebstrap, umoci = ensure_tools(log)
        uv = _uv(repo)
        base = _ensure_base(repo, suite, extras, mmdebstrap, umoci, uv, log)
        tag = image_tag(__version__, extras)
        log(f"building the offsetd image {tag}: the application layer on its base")
        with tempfile.TemporaryDirectory(prefix="build-", dir=entry.parent) as tmp:
            work = Path(tmp)
            env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
            wheels = [_wheel(uv, repo, work, env), *_native_wheel(uv, repo, work, env, log)]
            layout = work / "layout"
            shutil.copytree(base, layout)
            bundle = work / "bundle"
            run_tool([umoci, "unpack", "--image", f"{layout}:base", str(bundle)], work, env)
            for wheel in wheels:
                _install_wheel(wheel, bundle / "rootfs", env)
            reference = f"{layout}:{tag}"
            run_tool([umoci, "repack", "--image", reference, str(bundle)], work, env)
            config = umoci_config_args(__version__, extras)
            run_tool([umoci, "config", "--image", reference, *config], work, env)
            run_tool([umoci, "rm", "--image", f"{layout}:base"], work, env)
            run_tool([umoci, "gc", "--layout", str(layout)], work, env)
            size, uncompressed = _layer_sizes(layout, tag)
            info = {"tag": tag, "size_bytes": size, "uncompressed_bytes": uncompressed}
            info |= {"key": key, "extras": list(extras)}
            result = work / "result"
            result.mkdir()
            layout.replace(result / "layout")
            (result / "image.json").write_text(json.dumps(info, indent=2) + "\n")
            result.replace(entry)  # atomic
    loaded = _load_info(entry)
    if loaded is None:
        raise DevStackError(f"the image built into {entry} has no readable image.json")
    _prune(entry, extras)
    return loaded


def _ensure_base(
    repo: Path,
    suite: str,
    extras: tuple[str, ...],
    mmdebstrap: str,
    umoci: str,
    uv: str,
    log: Callable[[str], None],
) -> Path:
    """The OCI layout of the base (tagged `base`): Debian and the venv with the locked
    dependencies, built the first time for these requirements, suite, extras and recipe."""
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    image_root().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="requirements-", dir=image_root()) as tmp:
        listed = Path(tmp) / "requirements.txt"
        run_tool(requirements_argv(uv, extras, listed), repo, env)
        requirements = listed.read_bytes()
    entry = image_root() / f"base-{base_key(requirements, suite, extras)[:24]}"
    layout = entry / "layout"
    if (layout / "index.json").is_file():
        return layout
    log(f"building the image's base ({suite}, the locked dependencies; once per lock, minutes)")
    with tempfile.TemporaryDirectory(prefix="base-", dir=entry.parent) as tmp:
        work = Path(tmp)
        requirements_file = work / "requirements.txt"
        requirements_file.write_bytes(requirements)
        hook = work / "customize.sh"
        hook.write_text(_customize_script(requirements_file, _host_ca_bundle()))
        rootfs_tar = work / "rootfs.tar"
        log("mmdebstrap: Debian root filesystem + the venv of the locked dependencies")
        run_tool(mmdebstrap_argv(mmdebstrap, suite, extras, hook, rootfs_tar), work, env)
        built = work / "layout"
        reference = f"{built}:base"
        run_tool([umoci, "init", "--layout", str(built)], work, env)
        run_tool([umoci, "new", "--image", reference], work, env)
        run_tool([umoci, "raw", "add-layer", "--image", reference, str(rootfs_tar)], work, env)
        rootfs_tar.unlink()
        result = work / "result"
        result.mkdir()
        built.replace(result / "layout")
        (result / "extras").write_text(",".join(extras))
        result.replace(entry)  # atomic
    for sibling in entry.parent.glob("base-*"):  # an older base of the same variant: ~80 MB
        if sibling != entry and _read(sibling / "extras") == ",".join(extras):
            shutil.rmtree(sibling, ignore_errors=True)
    return layout


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _wheel(uv: str, repo: Path, work: Path, env: dict[str, str]) -> Path:
    dist = work / "dist"
    run_tool([uv, "build", "--wheel", "--quiet", "--out-dir", str(dist)], repo, env)
    wheels = sorted(dist.glob("offsetd-*.whl"))
    if len(wheels) != 1:
        raise DevStackError(f"uv build gave {len(wheels)} offsetd wheels in {dist}")
    return wheels[0]


def _native_wheel(
    uv: str, repo: Path, work: Path, env: dict[str, str], log: Callable[[str], None]
) -> list[Path]:
    """The compiled owner path's wheel (native/: maturin, with the host's Rust toolchain; an
    abi3 wheel for the image's Python 3.11 and Debian's glibc, the host's own), or none when
    the host has no cargo: the image's daemon then decides in Python, as it says at start."""
    cargo_env = {**env, "PATH": f"{Path.home() / '.cargo' / 'bin'}:{env.get('PATH', '')}"}
    if shutil.which("cargo", path=cargo_env["PATH"]) is None:
        log("no cargo here: the image's daemon decides frames in Python (native/ not built)")
        return []
    dist = work / "native-dist"
    argv = [uv, "build", "--wheel", "--quiet", "--out-dir", str(dist), str(repo / "native")]
    run_tool(argv, repo, cargo_env)
    wheels = sorted(dist.glob("offsetd_native-*.whl"))
    if len(wheels) != 1:
        raise DevStackError(f"uv build gave {len(wheels)} offsetd-native wheels in {dist}")
    return wheels


def _install_wheel(wheel: Path, rootfs: Path, env: dict[str, str]) -> None:
    """offsetd's wheel into the image's venv, as pip would: files, `offsetd` script with the
    image's interpreter, RECORD; then compiled by the image's own Python (its bytecode)."""
    try:  # a test tool (the dev group), not a dependency of offsetd: imported when building
        from installer import install  # noqa: PLC0415
        from installer.destinations import SchemeDictionaryDestination  # noqa: PLC0415
        from installer.sources import WheelFile  # noqa: PLC0415
    except ImportError:
        raise DevStackError(
            "building the image needs pypa's installer: run `make install`"
        ) from None

    venv = rootfs / APP_DIR.lstrip("/")
    purelib = next(venv.glob("lib/python3*/site-packages"), None)
    if purelib is None:
        raise DevStackError(f"the image's base has no venv at {APP_DIR}")
    scheme = {
        "purelib": str(purelib),
        "platlib": str(purelib),
        "scripts": str(venv / "bin"),
        "data": str(venv),
        "headers": str(venv / "include"),
    }
    destination = SchemeDictionaryDestination(
        scheme, interpreter=f"{APP_DIR}/bin/python3", script_kind="posix"
    )
    with WheelFile.open(wheel) as source:
        install(source, destination, {"INSTALLER": b"offsetd-image"})
    inside = "/" + purelib.relative_to(rootfs).as_posix() + "/offsetd"
    run_tool(
        ["chroot", str(rootfs), f"{APP_DIR}/bin/python3", "-m", "compileall", "-q", inside],
        rootfs,
        {"PATH": _PATH, "LANG": "C.UTF-8"},
    )


def _prune(keep: Path, extras: tuple[str, ...]) -> None:
    """Drop the older builds of the same variant: each is ~80 MB and a source edit makes one."""
    for sibling in keep.parent.iterdir():
        info = _load_info(sibling) if sibling != keep else None
        if info is not None and info.extras == extras:
            shutil.rmtree(sibling, ignore_errors=True)


def write_oci_archive(info: ImageInfo, path: Path) -> Path:
    """The layout as an oci-archive tarball: `podman load -i PATH` (or `skopeo copy
    oci-archive:PATH docker://REGISTRY/offsetd:TAG` to push it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for child in sorted(info.layout.iterdir()):
            tar.add(child, arcname=child.name)
    return path


def unpack_image(info: ImageInfo, dest: Path) -> Path:
    """Unpack the image as an OCI runtime bundle into `dest` (which must not exist yet) and
    return its root filesystem; file owners are kept, so this needs root."""
    umoci = require_tool("umoci", "install it (apt-get install umoci) and retry")
    dest.parent.mkdir(parents=True, exist_ok=True)
    run_tool([umoci, "unpack", "--image", info.reference, str(dest)], dest.parent, dict(os.environ))
    rootfs = dest / "rootfs"
    if not (rootfs / APP_DIR.lstrip("/") / "bin" / "offsetd").is_file():
        raise DevStackError(f"{rootfs} has no {APP_DIR}/bin/offsetd: the image is broken")
    return rootfs


def _customize_script(requirements: Path, ca_bundle: Path | None) -> str:
    """mmdebstrap's customize hook (run by sh with the new tree as $1): the user, the folders,
    the venv installed by the image's own python3 and pip, then build leftovers removed."""
    q = shlex.quote
    build = "/root/offsetd-build"  # inside the tree, removed before it is packed
    pip_env = [f"PATH={_PATH}", "HOME=/root", "LANG=C.UTF-8", "PIP_NO_CACHE_DIR=1"]
    pip_env += ["PIP_DISABLE_PIP_VERSION_CHECK=1"]
    pip_env += [f"{name}={os.environ[name]}" for name in _PIP_PASSTHROUGH if name in os.environ]
    if ca_bundle is not None:
        # The host's trust (e.g. an egress proxy's CA) for the build's downloads only.
        pip_env.append(f"PIP_CERT={build}/ca.crt")
    chroot_pip = 'chroot "$root" env -i ' + " ".join(q(item) for item in pip_env)
    lines = [
        "set -eu",
        'root="$1"',
        f'chroot "$root" groupadd --gid {IMAGE_GID} offsetd',
        f'chroot "$root" useradd --uid {IMAGE_UID} --gid {IMAGE_GID} --no-create-home'
        f" --home-dir {DATA_DIR} --shell /usr/sbin/nologin offsetd",
        f'install -d -m 0750 -o {IMAGE_UID} -g {IMAGE_GID} "$root{DATA_DIR}"',
        'install -d -m 0755 "$root/etc/offsetd"',
        f'install -d -m 0700 "$root{build}"',
        f'cp {q(str(requirements))} "$root{build}/"',
    ]
    if ca_bundle is not None:
        lines.append(f'cp {q(str(ca_bundle))} "$root{build}/ca.crt"')
    lines += [
        f'chroot "$root" /usr/bin/python3 -m venv {APP_DIR}',
        f"{chroot_pip} {APP_DIR}/bin/pip install --quiet --require-hashes"
        f" -r {build}/{requirements.name}",
        # pip and setuptools only install; the image never does.
        f"{chroot_pip} {APP_DIR}/bin/pip uninstall --quiet --yes pip setuptools",
        f'rm -rf "$root{build}" "$root/root/.cache" "$root/var/log/apt"',
        'rm -f "$root/var/cache/debconf"/*-old "$root/var/lib/dpkg"/*-old',
        f'printf {q(_HOSTS)} > "$root/etc/hosts"',
        # The runtime provides these; the build host's must not leak into the image.
        'rm -f "$root/etc/resolv.conf" "$root/etc/hostname"',
        'touch "$root/etc/resolv.conf"',
    ]
    return "\n".join(lines) + "\n"


def _host_ca_bundle() -> Path | None:
    for candidate in (
        os.environ.get("PIP_CERT"),
        os.environ.get("SSL_CERT_FILE"),
        "/etc/ssl/certs/ca-certificates.crt",
    ):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _repo_root() -> Path:
    repo = Path(__file__).resolve().parents[3]
    if not (repo / "uv.lock").is_file() or not (repo / "pyproject.toml").is_file():
        raise DevStackError(f"{repo} is not an offsetd checkout: the image is built from one")
    return repo


def _uv(repo: Path) -> str:
    local = repo / ".tools" / "bin" / "uv"
    if os.access(local, os.X_OK):
        return str(local)
    return require_tool("uv", "run `make install` (it installs uv into .tools/)")


def _load_info(entry: Path) -> ImageInfo | None:
    try:
        data = json.loads((entry / "image.json").read_text())
    except (OSError, ValueError):
        return None
    if not (entry / "layout" / "index.json").is_file():
        return None
    return ImageInfo(
        layout=entry / "layout",
        tag=str(data["tag"]),
        size_bytes=int(data["size_bytes"]),
        uncompressed_bytes=int(data["uncompressed_bytes"]),
        key=str(data["key"]),
        extras=tuple(str(extra) for extra in data["extras"]),
    )


def _blob(layout: Path, digest: str) -> Path:
    algorithm, _, hexdigest = digest.partition(":")
    return layout / "blobs" / algorithm / hexdigest


def _layer_sizes(layout: Path, tag: str) -> tuple[int, int]:
    """(compressed, uncompressed) bytes of the tagged manifest's layers."""
    index = json.loads((layout / "index.json").read_text())
    manifests = [
        m
        for m in index["manifests"]
        if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag
    ]
    if len(manifests) != 1:
        raise DevStackError(f"{layout} has {len(manifests)} manifests tagged {tag}")
    manifest = json.loads(_blob(layout, manifests[0]["digest"]).read_text())
    compressed = uncompressed = 0
    for layer in manifest["layers"]:
        compressed += int(layer["size"])
        with gzip.open(_blob(layout, layer["digest"]), "rb") as stream:
            while chunk := stream.read(1 << 20):
                uncompressed += len(chunk)
    return compressed, uncompressed
