"""The pure pieces of offsetd.devstack.image: the cache key, the variant naming, and the
mmdebstrap and umoci command lines (what the image is made of and how it is configured)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from offsetd.devstack.errors import DevStackError
from offsetd.devstack.image import (
    base_key,
    cache_key,
    debian_packages,
    image_tag,
    mmdebstrap_argv,
    normalize_extras,
    requirements_argv,
    umoci_config_args,
)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A minimal checkout: the lock, the project file and a two-file package."""
    (tmp_path / "uv.lock").write_text("version = 1\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'offsetd'\n")
    package = tmp_path / "daemon" / "offsetd"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("__version__ = '0.1.0'\n")
    (package / "cli" / "main.py").write_text("print('hi')\n")
    return tmp_path


def test_cache_key_is_stable_and_ignores_bytecode_caches(checkout: Path) -> None:
    first = cache_key(checkout, "bookworm", ())
    cache = checkout / "daemon" / "offsetd" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-311.pyc").write_bytes(b"\x00junk")
    (checkout / "daemon" / "offsetd" / "cli" / "main.cpython-311.pyc").write_bytes(b"x")
    assert cache_key(checkout, "bookworm", ()) == first
    assert len(first) == 64


@pytest.mark.parametrize(
    "edit",
    [
        lambda root: (root / "uv.lock").write_text("version = 2\n"),
        lambda root: (root / "pyproject.toml").write_text("[project]\nname = 'x'\n"),
        lambda root: (root / "daemon" / "offsetd" / "cli" / "main.py").write_text("print(1)\n"),
        lambda root: (root / "daemon" / "offsetd" / "rules.yaml").write_text("a: 1\n"),
        lambda root: (root / "daemon" / "offsetd" / "cli" / "main.py").rename(
            root / "daemon" / "offsetd" / "cli" / "other.py"
        ),
    ],
    ids=["lock", "pyproject", "source", "new-data-file", "rename"],
)
def test_cache_key_changes_with_every_input_file(
    checkout: Path, edit: Callable[[Path], object]
) -> None:
    before = cache_key(checkout, "bookworm", ())
    edit(checkout)
    assert cache_key(checkout, "bookworm", ()) != before


def test_cache_key_depends_on_suite_and_extras_but_not_their_order(checkout: Path) -> None:
    plain = cache_key(checkout, "bookworm", ())
    assert cache_key(checkout, "trixie", ()) != plain
    spark = cache_key(checkout, "bookworm", ("spark",))
    assert spark != plain
    assert cache_key(checkout, "bookworm", ("spark", "spark")) == spark
    assert cache_key(checkout, "bookworm", ("b", "a")) == cache_key(
        checkout, "bookworm", ("a", "b")
    )


def test_cache_key_needs_the_package_folder(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text("")
    (tmp_path / "pyproject.toml").write_text("")
    with pytest.raises(DevStackError, match="source checkout"):
        cache_key(tmp_path, "bookworm", ())


def test_extras_are_normalized_and_checked() -> None:
    assert normalize_extras(["spark", "kube", "spark"]) == ("kube", "spark")
    with pytest.raises(DevStackError, match="not an extra name"):
        normalize_extras(["spark; rm -rf /"])
    assert image_tag("0.1.0", ()) == "0.1.0"
    assert image_tag("0.1.0", ("spark",)) == "0.1.0-spark"


def test_only_the_spark_variant_gets_a_jre() -> None:
    assert "openjdk-17-jre-headless" not in debian_packages(())
    assert "openjdk-17-jre-headless" in debian_packages(("spark",))
    assert {"python3", "python3-venv", "ca-certificates"} <= set(debian_packages(()))


def test_mmdebstrap_command_line(tmp_path: Path) -> None:
    hook, out = tmp_path / "my hook.sh", tmp_path / "rootfs.tar"
    argv = mmdebstrap_argv("/usr/bin/mmdebstrap", "bookworm", ("spark",), hook, out)
    assert argv[0] == "/usr/bin/mmdebstrap"
    assert "--variant=minbase" in argv
    assert "--include=python3,python3-venv,ca-certificates,netbase,openjdk-17-jre-headless" in argv
    assert "--dpkgopt=path-exclude=/usr/share/doc/*" in argv
    assert "--dpkgopt=path-include=/usr/share/doc/*/copyright" in argv
    # The hook path is quoted for sh; $1 (the tree) is left for mmdebstrap to fill.
    assert f"--customize-hook=sh '{hook}' \"$1\"" in argv
    suite_at = argv.index("bookworm")
    assert argv[suite_at + 1] == str(out)
    assert argv[suite_at + 2 :] == [
        "deb http://deb.debian.org/debian bookworm main",
        "deb http://deb.debian.org/debian bookworm-updates main",
        "deb http://deb.debian.org/debian-security bookworm-security main",
    ]


def test_umoci_config_matches_the_containerfile() -> None:
    args = umoci_config_args("1.2.3", ())
    assert "--config.entrypoint=/opt/offsetd/bin/offsetd" in args
    cmd = [a.removeprefix("--config.cmd=") for a in args if a.startswith("--config.cmd=")]
    assert cmd == ["run", "--config", "/etc/offsetd/offsetd.yaml"]
    assert "--config.user=10001:10001" in args
    assert "--config.workingdir=/var/lib/offsetd" in args
    assert "--config.exposedports=6066/tcp" in args
    assert "--config.volume=/var/lib/offsetd" in args
    env = dict(
        a.removeprefix("--config.env=").split("=", 1) for a in args if a.startswith("--config.env=")
    )
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/var/lib/offsetd"
    assert env["PATH"].startswith("/opt/offsetd/bin:")
    assert "JAVA_HOME" not in env
    assert "--config.label=org.opencontainers.image.version=1.2.3" in args
    spark = umoci_config_args("1.2.3", ("spark",))
    assert any(a.startswith("--config.env=JAVA_HOME=/usr/lib/jvm/") for a in spark)
    assert "--config.label=io.offsetd.image.extras=spark" in spark


def test_the_base_is_keyed_by_the_runtime_requirements_the_real_lock_exports(
    tmp_path: Path,
) -> None:
    """The base layer is the venv of the lock's runtime requirements: it is keyed by them
    (`uv export`, run here on the real lock), not by the whole lock, so a change to the dev
    tools' or the compiled path's pins (dependency groups) builds no new base."""
    repo = Path(__file__).resolve().parents[3]
    listed = tmp_path / "requirements.txt"
    argv = requirements_argv(str(repo / ".tools" / "bin" / "uv"), ("spark",), listed)
    subprocess.run(argv, cwd=repo, check=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"})
    requirements = listed.read_text()
    names = {line.split("==")[0] for line in requirements.splitlines() if "==" in line}
    assert {"pydantic", "faust-streaming", "confluent-kafka", "pyspark"} <= names
    assert not names & {"pytest", "hypothesis", "mypy", "ruff", "offsetd-native", "maturin"}
    assert str(tmp_path) not in requirements  # no header naming the output: keyed by content
    key = base_key(listed.read_bytes(), "bookworm", ("spark",))
    assert key == base_key(listed.read_bytes(), "bookworm", ("spark",))
    assert key != base_key(listed.read_bytes() + b"six==1.16.0\n", "bookworm", ("spark",))
    assert key != base_key(listed.read_bytes(), "trixie", ("spark",))
    assert key != base_key(listed.read_bytes(), "bookworm", ())
