"""Pinned jars from Maven Central, copied with `mvn` into a cache outside git.

Both the local stack (Kafka's jars) and local Spark runs (Spark's Kafka source) need jars that
a pom pins; this is the one place that fetches them. The maven-dependency-plugin is pinned too
(an unpinned `dependency:` goal resolves an old plugin from Maven's super-POM). A finished copy
is marked with the pom's hash, so a changed pom gets a fresh directory and a half-finished copy
is never used.

It raises `JarFetchError`, which is not an operator-facing error on its own: each caller turns
it into its own command's error (and exit code) with the same message.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["DEPENDENCY_PLUGIN", "JarFetchError", "cache_root", "ensure_copied"]

DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_MARKER = ".complete"


class JarFetchError(RuntimeError):
    """mvn is missing or could not copy the jars; the message is one sentence for an operator."""


def cache_root() -> Path:
    """`$OFFSETD_JAR_CACHE`, else `$XDG_CACHE_HOME/offsetd/jars`, else `~/.cache/offsetd/jars`."""
    env = os.environ.get("OFFSETD_JAR_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "offsetd" / "jars"


def ensure_copied(pom: Path, name: str, what: str, root: Path | None = None) -> Path:
    """The runtime jars of `pom` in `<root>/<name>-<pom hash>`, copied with mvn the first time.

    The copy goes to a `.partial` folder renamed once complete (with a marker), so a copy
    interrupted half-way is never used. Errors name `what` (e.g. "the Kafka jars")."""
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = (root or cache_root()) / f"{name}-{digest}"
    if (target / _MARKER).is_file():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarFetchError(
            "mvn was not found on PATH: install Apache Maven (e.g. apt-get install maven)"
        )
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
        raise JarFetchError(
            f"mvn could not fetch {what} from Maven Central (exit {result.returncode}); "
            f"check network access to Maven Central and retry: {tail}"
        )
    (staging / _MARKER).write_text(digest)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target
