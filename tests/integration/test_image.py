"""offsetd's OCI image (offsetd.devstack.image), built from Debian packages and the wheel, then
started for real: its root filesystem inspected, and the image run by podman against the stack.

Why podman and not a chroot: podman runs the image as a container runtime would, so the image
config (entrypoint, cmd, user 10001, workdir, env, VOLUME) is exercised, not only the files, and
`--read-only` gives a truly read-only root. In this sandbox two quirks need flags, harmless
elsewhere: crun rejects its hybrid cgroup layout (so `--runtime runc`), and it lacks
CAP_SYS_RESOURCE, so podman's default RLIMIT_NOFILE/NPROC cannot be set (so `--ulimit` at or
below the current limits). No registry is needed: the layout is loaded from an oci-archive.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from offsetd.devstack.image import (
    IMAGE_UID,
    ImageInfo,
    ensure_image,
    unpack_image,
    write_oci_archive,
)
from offsetd.devstack.stack import StackInfo
from tests.integration.daemonproc import REPO, decide_only_config
from tests.integration.kafkautil import unique

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

MAX_UNCOMPRESSED = 250 * 1000 * 1000
CONFIG_IN_IMAGE = "/etc/offsetd/offsetd.yaml"
RULES_IN_IMAGE = "/etc/offsetd/rules"


@pytest.fixture(scope="module")
def image() -> ImageInfo:
    """The cached image of the current sources (built the first time, under a minute)."""
    return ensure_image(log=print)


@pytest.fixture(scope="module")
def rootfs(image: ImageInfo, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_image(image, tmp_path_factory.mktemp("image") / "bundle")


@pytest.fixture(scope="module")
def podman_image(image: ImageInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The image loaded into podman's store from an oci-archive; removed afterwards."""
    for tool in ("podman", "runc"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install podman runc")
    archive = write_oci_archive(image, tmp_path_factory.mktemp("oci") / "offsetd-oci.tar")
    loaded = _podman("load", "--quiet", "--input", str(archive)).stdout
    match = re.search(r"Loaded image(?:\(s\))?: (\S+)", loaded)
    assert match, loaded
    yield match.group(1)
    subprocess.run(["podman", "rmi", "--force", match.group(1)], capture_output=True, check=False)


def _podman(
    *args: str, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args[:2])} failed: {done.stderr[-2000:]}")
    return done


def _run_flags() -> list[str]:
    """`podman run` flags of every test: read-only root, host network (the stack is on
    loopback), and limits this sandbox allows (see the module docstring)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return [
        "--runtime=runc",
        "--rm",
        "--read-only",
        "--network=host",
        f"--ulimit=nofile={nofile}:{nofile}",
        "--ulimit=nproc=4096:4096",
    ]


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    with path.open("w") as out:
        YAML().dump(data, out)
    return path


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180) -> None:
    """Poll `<url>/readyz` until 200 (Kafka, the stream and Connect all answer); fails early if
    the container exits."""
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the container exited ({proc.returncode}): {log.read_text()}")
        try:
            readyz = httpx.get(f"{url}/readyz", timeout=2)
            if readyz.status_code == 200:
                return
            last = f"/readyz {readyz.status_code}: {readyz.text}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1)
    raise AssertionError(f"{url} not ready after {timeout_s} s ({last}): {log.read_text()}")


def test_the_image_is_small_and_holds_only_its_runtime(image: ImageInfo, rootfs: Path) -> None:
    assert image.uncompressed_bytes < MAX_UNCOMPRESSED, image
    assert 0 < image.size_bytes < image.uncompressed_bytes
    venv = rootfs / "opt" / "offsetd"
    # The venv is made by the image's own Debian python3.11, not by anything of the host.
    assert "home = /usr/bin\n" in (venv / "pyvenv.cfg").read_text()
    assert os.readlink(venv / "bin" / "python") in {"python3", "/usr/bin/python3"}
    assert (rootfs / "usr" / "bin" / "python3.11").is_file()
    site = venv / "lib" / "python3.11" / "site-packages"
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"offsetd", "faust_streaming", "confluent_kafka", "pydantic"} <= installed
    # The compiled owner path (native/), built with this machine's Rust: abi3, one module.
    assert "offsetd_native" in installed
    assert [p.name for p in (site / "offsetd_native").glob("*.so")] == ["offsetd_native.abi3.so"]
    assert not installed & {"pytest", "mypy", "ruff", "hypothesis", "pip", "pyspark"}
    data = (rootfs / "var" / "lib" / "offsetd").stat()
    assert (data.st_uid, data.st_gid, data.st_mode & 0o777) == (IMAGE_UID, IMAGE_UID, 0o750)
    # No docs beyond licences, no full perl (usrmerge's), no apt lists, no build-host DNS.
    docs = {p.name for p in (rootfs / "usr" / "share" / "doc").rglob("*") if p.is_file()}
    assert docs <= {"copyright"}
    assert not (rootfs / "usr" / "share" / "perl").exists()
    assert not list((rootfs / "var" / "lib" / "apt" / "lists").glob("*_Packages"))
    assert (rootfs / "etc" / "resolv.conf").read_text() == ""
    assert "localhost" in (rootfs / "etc" / "hosts").read_text()


def test_the_image_config_matches_the_containerfile(podman_image: str) -> None:
    inspected = json.loads(_podman("image", "inspect", podman_image).stdout)[0]
    config = inspected["Config"]
    assert config["Entrypoint"] == ["/opt/offsetd/bin/offsetd"]
    assert config["Cmd"] == ["run", "--config", CONFIG_IN_IMAGE]
    assert config["User"] == "10001:10001"
    assert config["WorkingDir"] == "/var/lib/offsetd"
    assert "6066/tcp" in config["ExposedPorts"]
    assert "/var/lib/offsetd" in config["Volumes"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/var/lib/offsetd"
    version = importlib.metadata.version("offsetd")
    assert config["Labels"]["org.opencontainers.image.version"] == version


def test_the_entrypoint_prints_the_version_as_uid_10001_on_its_own_python(
    podman_image: str,
) -> None:
    version = importlib.metadata.version("offsetd")
    done = _podman("run", *_run_flags(), podman_image, "--version")
    assert done.stdout.strip() == f"offsetd, version {version}"
    probe = (
        "import os, sys, offsetd; "
        "print(os.getuid(), os.getgid(), sys.base_prefix, sys.version_info[:2], "
        "offsetd.__file__, os.getcwd())"
    )
    python = "/opt/offsetd/bin/python"
    done = _podman("run", *_run_flags(), "--entrypoint", python, podman_image, "-c", probe)
    assert done.stdout.split() == [
        "10001",
        "10001",
        "/usr",
        "(3,",
        "11)",
        "/opt/offsetd/lib/python3.11/site-packages/offsetd/__init__.py",
        "/var/lib/offsetd",
    ]


def test_config_check_passes_on_the_stack_config_and_fails_on_a_broken_one(
    podman_image: str, stack: StackInfo, tmp_path: Path
) -> None:
    good = _write_yaml(tmp_path / "good.yaml", stack.offsetd_config())
    broken = _write_yaml(tmp_path / "broken.yaml", {"kafka_clusters": {"east": {}}})
    check = ["config", "check", "--config", CONFIG_IN_IMAGE]
    mount = f"--volume={good}:{CONFIG_IN_IMAGE}:ro"
    done = _podman("run", *_run_flags(), mount, podman_image, *check)
    assert done.returncode == 0, done.stderr
    mount = f"--volume={broken}:{CONFIG_IN_IMAGE}:ro"
    done = _podman("run", *_run_flags(), mount, podman_image, *check, check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)


def test_the_daemon_runs_in_the_image_against_the_stack(
    podman_image: str, stack: StackInfo, tmp_path: Path
) -> None:
    """`offsetd run` with the image's default command: read-only root, data in the VOLUME."""
    config = tmp_path / "offsetd.yaml"
    data = decide_only_config(
        stack,
        config,
        app_id=unique("offsetd-image"),
        rules_dir=Path(RULES_IN_IMAGE),
        partitions=1,
        audit_topic=unique("offsetd.audit"),
        data_dir=Path("/var/lib/offsetd/state"),
    )
    port = data["daemon"]["web_port"]
    name = unique("offsetd-image-test")
    log = tmp_path / "container.log"
    argv = [
        "podman",
        "run",
        *_run_flags(),
        f"--name={name}",
        f"--volume={config}:{CONFIG_IN_IMAGE}:ro",
        f"--volume={REPO / 'rules' / 'examples'}:{RULES_IN_IMAGE}:ro",
        podman_image,  # no arguments: the image's CMD, `run --config /etc/offsetd/offsetd.yaml`
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc, log)
        checks = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()["checks"]
        assert {name for name, check in checks.items() if check["ok"]} == {
            "kafka",
            "stream",
            "ingest",
            "connect:local",
        }
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
        assert "offsetd_" in metrics
        state = _podman("exec", name, "ls", "-A", "/var/lib/offsetd/state").stdout.split()
        assert state, "the daemon wrote nothing into its data dir"
        # the image's daemon decides with the compiled owner path built into it (native/)
        assert "frames are decided by the compiled engine" in log.read_text(), log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # podman forwards it to the daemon
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        _podman("rm", "--force", "--ignore", name, check=False)
    assert proc.returncode == 0, log.read_text()
