"""Choosing a command's offsets backend once, from the Connect cluster and the command's flags."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from offsetd.cli.common import Target, resolve_target, run_async
from offsetd.offsets.backend import (
    BackendRequest,
    OfflineOptions,
    OffsetsBackend,
    StepwiseBackend,
    Timeouts,
)
from offsetd.offsets.registry import backend_for, stepwise_backend_for

__all__ = [
    "F",
    "backend_of",
    "offline_options",
    "online_backend_of",
    "say",
    "take_offline",
    "target_of",
    "with_client",
]

F = Callable[..., Any]


def say(message: str) -> None:
    click.echo(f"[offsetd] {message}", err=True)


def target_of(**kwargs: Any) -> Target:
    return resolve_target(**kwargs)


def _request(
    target: Target, offline: OfflineOptions | None, stop_timeout: float, resume_timeout: float
) -> BackendRequest:
    return BackendRequest.for_cluster(
        target.name,
        target,
        target.client,
        target.store,
        settings=target.settings,
        worker=target.worker,
        offline=offline,
        timeouts=Timeouts(stop_s=stop_timeout, resume_s=resume_timeout),
        log=say,
    )


def backend_of(
    target: Target,
    offline: OfflineOptions | None,
    stop_timeout: float = 60,
    resume_timeout: float = 120,
) -> OffsetsBackend[Any, Any]:
    """The backend that serves this command (see offsetd.offsets.registry)."""
    return backend_for(_request(target, offline, stop_timeout, resume_timeout))


def online_backend_of(
    target: Target, stop_timeout: float = 60, resume_timeout: float = 120
) -> StepwiseBackend:
    """For the commands that work through the workers only (export, import)."""
    return stepwise_backend_for(_request(target, None, stop_timeout, resume_timeout))


def with_client(target: Target, work: Callable[[], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        async with target.client:
            return await work()

    return run_async(run())


def offline_options(func: F) -> F:
    options = [
        click.option(
            "--offline",
            is_flag=True,
            help="Read/write the offsets topic or consumer group directly, not via REST.",
        ),
        click.option(
            "--force",
            "offline_force",
            is_flag=True,
            help="--offline: write even though a worker runs the connector's tasks.",
        ),
        click.option(
            "--assume-workers-down",
            is_flag=True,
            help="--offline: no worker answers REST; write anyway.",
        ),
        click.option(
            "--key-template",
            default=None,
            help="--offline: a key in the offsets topic's format giving the key order "
            "of new partitions, for connector classes offsetd does not know.",
        ),
        click.option(
            "--connector-type",
            type=click.Choice(["source", "sink"]),
            default=None,
            help="--offline: the connector's type when its config cannot tell.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def take_offline(kw: dict[str, Any], *, dry_run: bool) -> OfflineOptions | None:
    """Take the --offline options out of the keyword arguments meant for resolve_target;
    None unless --offline was given."""
    offline = kw.pop("offline")
    options = OfflineOptions(
        force=kw.pop("offline_force"),
        assume_workers_down=kw.pop("assume_workers_down"),
        key_template=kw.pop("key_template"),
        connector_type=kw.pop("connector_type"),
        dry_run=dry_run,
    )
    return options if offline else None
