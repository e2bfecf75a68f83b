"""The pinned Ory Hydra binary: the OpenID Connect provider of the `--login oauth` stack.

No registry reachable here ships Hydra's release binaries, but the Go module proxy serves its
source: a wrapper module takes `github.com/ory/hydra/v2` as a tool (`go get -tool`) and builds
it with the `sqlite` tag, which `DSN=memory` needs (an in-memory SQLite database, cgo). A
dependency's `replace` lines do not apply to the module that requires it, so the wrapper
repeats Hydra's replacements by other modules (its fork of `pop`, without which it does not
compile); the one by a local folder (`./internal/httpclient`) is not in the published module,
and the published `hydra-client-go` Hydra requires stands in for it. The build compiles a few
hundred packages (minutes on two loaded cores; half a minute with a warm Go build cache), so the
result is cached by version next to kube-apiserver and helm (`kubebin.binaries_root`), built
on first use (`offsetd dev up --secure --login oauth`, or beside the tests when a test run
starts: tests/conftest.py), and never committed.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from offsetd.devstack.jars import require_tool
from offsetd.devstack.kubebin import binaries_root, build_lock, run_tool

__all__ = ["HYDRA_VERSION", "ensure_hydra", "module_replaces"]

HYDRA_VERSION = "v2.3.0"
_MODULE = "github.com/ory/hydra/v2"
_BUILD_TAGS = "sqlite,sqlite_omit_load_extension"
_REPLACE_RE = re.compile(r"^replace\s+(\S+)\s+=>\s+([^.\s/]\S*\s+v\S+)\s*$", re.MULTILINE)


def module_replaces(go_mod: str) -> list[str]:
    """Hydra's `replace` lines that name another module (not a local folder), for the wrapper."""
    return [f"replace {old} => {new}" for old, new in _REPLACE_RE.findall(go_mod)]


def ensure_hydra(
    version: str = HYDRA_VERSION, log: Callable[[str], None] = lambda _msg: None
) -> Path:
    """The cached `hydra` of `version`, built the first time (several minutes)."""
    target = binaries_root() / "hydra" / version / "hydra"
    if target.is_file():
        return target
    with build_lock(target):
        if not target.is_file():
            _build_hydra(version, target, log)
    return target


def _build_hydra(version: str, target: Path, log: Callable[[str], None]) -> None:
    go = require_tool("go", "install Go 1.24 or newer (the Hydra build needs it)")
    require_tool("gcc", "install gcc (Hydra's in-memory SQLite store is built with cgo)")
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"}
    log(f"building Ory Hydra {version} from the Go module proxy (once, several minutes)")
    with tempfile.TemporaryDirectory(prefix="hydra-", dir=target.parent) as tmp:
        work = Path(tmp)
        info = json.loads(
            run_tool([go, "mod", "download", "-json", f"{_MODULE}@{version}"], work, env)
        )
        replaces = module_replaces(Path(info["GoMod"]).read_text())
        (work / "go.mod").write_text(
            "module offsetd.local/hydra\n\ngo 1.24\n\n" + "\n".join(replaces) + "\n"
        )
        run_tool([go, "get", "-tool", f"{_MODULE}@{version}"], work, env)
        stamp = f"-X {_MODULE}/driver/config.Version={version}"
        built = work / "hydra"
        run_tool(
            [
                go,
                "build",
                "-trimpath",
                f"-tags={_BUILD_TAGS}",
                f"-ldflags=-s -w {stamp}",
                "-o",
                str(built),
                _MODULE,
            ],
            work,
            env,
        )
        built.replace(target)  # same folder's filesystem: atomic, never a half-written binary
