"""The status windows, kept in a small JSON file so that a restart does not forget them.

Why a file and not a compacted topic: exactly one offsetd worker runs lag collection, the
windows are a cache of observations (losing them only delays STALL/WARN by one window, never
produces a wrong status), and a file needs no topic, ACLs or extra read at start. In Kubernetes,
`daemon.data_dir` must be on a volume for the windows to survive the pod. Writes go to a
temporary file that is renamed over the old one, so a crash leaves the previous file whole;
an unreadable file is ignored (and replaced at the next save).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from offsetd.lag.status import Sample

__all__ = ["WindowKey", "load_windows", "save_windows"]

#: (connect cluster, connector, topic, partition)
WindowKey = tuple[str, str, str, int]
_VERSION = 1


def save_windows(path: Path, windows: dict[WindowKey, list[Sample]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [
        [*key, [[s.n, s.end, s.t_ms] for s in samples]]
        for key, samples in windows.items()
        if samples
    ]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # json.dumps, not json.dump: only the one-shot form uses the C encoder (dump streams through
    # the pure-Python one, ~10x slower on 100k windows).
    tmp.write_text(json.dumps({"version": _VERSION, "windows": rows}, separators=(",", ":")))
    tmp.replace(path)


def load_windows(path: Path) -> dict[WindowKey, list[Sample]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    out: dict[WindowKey, list[Sample]] = {}
    for row in data.get("windows", []):
        try:
            cluster, connector, topic, partition, samples = row
            key = (str(cluster), str(connector), str(topic), int(partition))
            out[key] = [Sample(int(n), int(end), int(t)) for n, end, t in samples]
        except (TypeError, ValueError):
            continue
    return out
