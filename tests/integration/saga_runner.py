"""Runs the daemon's remediation layer on decisions, or recovers, in its own process.

`python -m tests.integration.saga_runner CONFIG run DECISION.json...` writes each decision to
the audit (as the daemon does) and handles it, in turn; `... CONFIG recover` starts the
remediation layer the way `offsetd run` does after a crash (unfinished sagas, decisions with no
outcome) and waits until that work is done. With OFFSETD_TEST_HOOKS=1 and OFFSETD_FAULT set,
`run` dies at the chosen point, exactly like a killed daemon. The production code path is the
one `offsetd run` uses (`build_remediator`); only faust's stream is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from prometheus_client import CollectorRegistry

from offsetd.audit import AuditLog
from offsetd.config import load_settings
from offsetd.connect.client import ConnectClient
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import Decision
from offsetd.metrics.instruments import RemediationMetrics
from offsetd.remediation.executor import Remediator
from offsetd.remediation.wiring import build_remediator

REPO = Path(__file__).resolve().parents[2]


def spawn(config: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run this module in a child process (`run DECISION.json` or `recover`), with `fault`
    (`crash:<step>:<when>`) armed through the test hooks when given."""
    env = {**os.environ}
    env.pop("OFFSETD_FAULT", None)
    if fault:
        env.update(OFFSETD_TEST_HOOKS="1", OFFSETD_FAULT=fault)
    return subprocess.run(
        [sys.executable, "-m", "tests.integration.saga_runner", str(config), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@contextlib.asynccontextmanager
async def remediation_layer(
    config: Path, registry: CollectorRegistry | None = None
) -> AsyncIterator[tuple[Remediator, AuditLog]]:
    """The remediator `offsetd run` builds (`build_remediator`) and its audit log, closed after."""
    settings = load_settings(config)
    alias = settings.daemon_kafka_cluster()
    connect = dict(settings.connect_clusters)
    audit = AuditLog(settings.kafka_clusters[alias].client_config(), settings.daemon.audit_topic)
    audit.start()
    meta = ConnectorMetaCache({n: ConnectClient.for_cluster(c) for n, c in connect.items()})
    for name in connect:
        await meta.refresh(name, force=True)
    metrics = RemediationMetrics.create(CollectorRegistry() if registry is None else registry)
    remediator = build_remediator(settings, alias, connect, audit, metrics, meta)
    remediator.poll_s = 0.5
    try:
        yield remediator, audit
    finally:
        await remediator.stop()
        await meta.aclose()
        remediator.sagas.close()
        remediator.control.close()
        audit.close()


async def main(config: Path, mode: str, decision_files: list[Path]) -> int:
    async with remediation_layer(config) as (remediator, audit):
        if mode == "run":
            assert decision_files
            outcomes = []
            for decision_file in decision_files:  # in turn, in one process (one worker's life)
                decision = Decision.model_validate_json(decision_file.read_text())
                await audit.write(decision.audit_record())
                outcomes.append(await remediator.handle(decision))
            print(json.dumps({"outcome": outcomes[-1], "outcomes": outcomes}))
        else:
            await remediator.start(lambda _cluster, _connector: True)
            await remediator.idle()
            print(json.dumps({"outcome": "recovered"}))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    args = sys.argv[1:]
    sys.exit(asyncio.run(main(Path(args[0]), args[1], [Path(a) for a in args[2:]])))
