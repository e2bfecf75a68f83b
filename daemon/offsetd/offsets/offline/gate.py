"""The safety gate run before any offline write: no Connect worker may be running the connector.

A task holds its position in memory and writes it back, so an offline write under a live task
is lost or, worse, half-applied. The gate asks Connect's REST API (if any worker answers) and
refuses unless the connector's tasks are all gone, or the operator says the workers are down.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from offsetd.offsets.offline.view import (
    OfflineError,
)

__all__ = ["LIVE_TASK_STATES", "OfflineRefused", "acheck_offline_allowed", "check_offline_allowed"]

LIVE_TASK_STATES = ("RUNNING", "PAUSED", "RESTARTING", "UNASSIGNED")


class OfflineRefused(OfflineError):
    """Offline writes were refused because Connect workers may still be running the connector."""

    exit_code = 14


def check_offline_allowed(
    rest_url: str | None,
    connector: str,
    *,
    force: bool,
    assume_workers_down: bool,
    http: httpx.Client | None = None,
) -> None:
    """Refuse offline writes while a worker may still run the connector's tasks.

    A worker answering REST with a task of the connector RUNNING (or PAUSED, RESTARTING,
    UNASSIGNED: such tasks keep their position in memory and write it back) is refused unless
    `force`. A connector the workers do not know (404), or one with no live task (STOPPED, or
    only FAILED tasks) is allowed. When no REST URL is known or nothing answers, the caller
    must vouch with `assume_workers_down`.

    `http` must carry the cluster's basic auth and CA: a plain client cannot even finish the
    TLS handshake with an HTTPS worker, and that failure reads as "no worker answered".
    """
    if rest_url is None:
        _verdict(None, connector, None, force=force, assume_workers_down=assume_workers_down)
        return
    client = http or httpx.Client(timeout=_TIMEOUT_S)
    try:
        answer: httpx.Response | httpx.TransportError = client.get(_status_url(rest_url, connector))
    except httpx.TransportError as exc:
        answer = exc
    finally:
        if http is None:
            client.close()
    _verdict(rest_url, connector, answer, force=force, assume_workers_down=assume_workers_down)


async def acheck_offline_allowed(
    rest_url: str | None,
    connector: str,
    *,
    force: bool,
    assume_workers_down: bool,
    http: httpx.AsyncClient,
) -> None:
    """`check_offline_allowed` through the toolkit's own REST client (its credentials and CA),
    so the gate sees a secured worker exactly as the online commands do."""
    if rest_url is None:
        _verdict(None, connector, None, force=force, assume_workers_down=assume_workers_down)
        return
    try:
        answer: httpx.Response | httpx.TransportError = await http.get(
            _status_url(rest_url, connector), timeout=_TIMEOUT_S
        )
    except httpx.TransportError as exc:
        answer = exc
    _verdict(rest_url, connector, answer, force=force, assume_workers_down=assume_workers_down)


_TIMEOUT_S = 10.0


def _status_url(rest_url: str, connector: str) -> str:
    return f"{rest_url.rstrip('/')}/connectors/{quote(connector, safe='')}/status"


def _verdict(
    rest_url: str | None,
    connector: str,
    answer: httpx.Response | httpx.TransportError | None,
    *,
    force: bool,
    assume_workers_down: bool,
) -> None:
    """The gate's decision on what the status request got (None: no URL to ask)."""
    if rest_url is None or answer is None:
        if not assume_workers_down:
            raise OfflineRefused(
                "no Connect REST URL is known, so offsetd cannot check that the workers are "
                "down; make sure no worker runs, then pass --assume-workers-down"
            )
        return
    if isinstance(answer, httpx.TransportError):
        if assume_workers_down:
            return
        raise OfflineRefused(
            f"no Connect worker answered at {rest_url} ({type(answer).__name__}), which is what "
            "offline mode expects, but offsetd cannot tell a stopped worker from an unreachable "
            "one; pass --assume-workers-down once you have checked"
        )
    response = answer
    if response.status_code == 404:
        return
    tasks = _tasks_of(response)
    if tasks is None:
        if force:
            return
        raise OfflineRefused(
            f"a Connect worker at {rest_url} answered {response.status_code} for connector "
            f"{connector}'s status, and offsetd cannot tell from that whether its tasks run; "
            "fix access or pass --force"
        )
    live = [
        f"task {t.get('id')} {t.get('state')}" for t in tasks if t.get("state") in LIVE_TASK_STATES
    ]
    if live and not force:
        raise OfflineRefused(
            f"connector {connector} has live tasks on a running worker ({', '.join(live)}), "
            "which would overwrite offline offsets: stop the connector (PUT "
            f"/connectors/{connector}/stop on Connect 3.5+) or its workers, or pass --force"
        )


def _tasks_of(response: httpx.Response) -> list[dict[str, Any]] | None:
    """The task list of a 200 status answer, or None when the answer says nothing usable."""
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    tasks = body.get("tasks") if isinstance(body, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        return None
    return tasks
