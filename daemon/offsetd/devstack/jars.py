"""The pinned Apache Kafka jars of the local stack, and the Java that runs them.

The pom in `deploy/local/maven/` pins every version; `offsetd.jarcache` copies them with `mvn`
into a cache outside git.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

from offsetd.devstack.errors import DevStackError
from offsetd.jarcache import JarFetchError, cache_root, ensure_copied

__all__ = [
    "POM_RELATIVE",
    "cache_root",
    "ensure_kafka_jars",
    "find_pom",
    "java_executable",
    "kafka_version",
    "require_tool",
]

POM_RELATIVE = Path("deploy/local/maven/pom.xml")
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
    try:
        return ensure_copied(pom, f"kafka-{kafka_version(pom)}", "the Kafka jars")
    except JarFetchError as exc:  # same message, the stack's exit code
        raise DevStackError(str(exc)) from exc
