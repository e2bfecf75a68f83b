"""Fetch the pinned Apache Kafka jars from Maven Central with `mvn`, into a cache outside git.

The pom in `deploy/local/maven/` pins every version; the maven-dependency-plugin is pinned too
(an unpinned `dependency:` goal resolves an old plugin from Maven's super-POM). A finished copy is
marked with the pom's hash, so a changed pom gets a fresh directory and a half-finished copy is
never used.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from offsetd.devstack.errors import DevStackError

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
POM_RELATIVE = Path("deploy/local/maven/pom.xml")
_MARKER = ".complete"
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def find_pom() -> Path:
    """The stack's pom in the source checkout (offsetd dev is a tool for a checkout)."""
    candidates = [Path(__file__).resolve().parents[3], *Path.cwd().resolve().parents, Path.cwd()]
    env_root = os.environ.get("OFFSETD_SOURCE_ROOT")
    if env_root:
        candidates.insert(0, Path(env_root))
    for root in candidates:
        if (root / POM_RELATIVE).is_file():
            return root / POM_RELATIVE
    raise DevStackError(
        f"cannot find {POM_RELATIVE}: run offsetd dev from an offsetd source checkout "
        "or set OFFSETD_SOURCE_ROOT to one"
    )


def kafka_version(pom: Path) -> str:
    root = ET.parse(pom).getroot()  # noqa: S314 - our own pom, from the checkout
    node = root.find("m:properties/m:kafka.version", _POM_NS)
    if node is None or not node.text:
        raise DevStackError(f"{pom} has no <kafka.version> property")
    return node.text.strip()


def cache_root() -> Path:
    env = os.environ.get("OFFSETD_JAR_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "offsetd" / "jars"


def require_tool(name: str, install_hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise DevStackError(f"{name} was not found on PATH: {install_hint}")
    return path


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` if set, else `java` on PATH; must be Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    hint = "install Java 17 or newer (e.g. apt-get install openjdk-17-jre-headless)"
    java = str(Path(java_home) / "bin" / "java") if java_home else require_tool("java", hint)
    try:
        out = subprocess.run(
            [java, "-XshowSettings:properties", "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stderr
    except OSError as exc:
        raise DevStackError(f"cannot run {java} ({exc}): {hint}") from exc
    version = next(
        (line.split("=", 1)[1].strip() for line in out.splitlines() if "java.version =" in line),
        "",
    )
    major = int(version.split(".")[0]) if version[:1].isdigit() else 0
    if major < 17:
        raise DevStackError(f"{java} is Java {version or 'of unknown version'}: {hint}")
    return java


def ensure_kafka_jars(pom: Path | None = None) -> Path:
    """Return a directory holding every jar of the stack, fetching it with mvn when needed."""
    pom = pom or find_pom()
    return ensure_copied(pom, f"kafka-{kafka_version(pom)}", "the Kafka jars")


def ensure_copied(pom: Path, name: str, what: str, root: Path | None = None) -> Path:
    """The runtime jars of `pom` in `<root>/<name>-<pom hash>`, copied with mvn the first time.

    The copy goes to a `.partial` folder renamed once complete (with a marker), so a copy
    interrupted half-way is never used. Errors name `what` (e.g. "the Kafka jars")."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = (root or cache_root()) / f"{name}-{digest}"
    if (target / _MARKER).is_file():
        return target
    mvn = require_tool("mvn", "install Apache Maven (e.g. apt-get install maven)")
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={staging}",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = " | ".join((result.stdout + result.stderr).strip().splitlines()[-3:])
        raise DevStackError(
            f"mvn could not fetch {what} from Maven Central (exit {result.returncode}); "
            f"check network access to Maven Central and retry: {tail}"
        )
    (staging / _MARKER).write_text(digest)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
