"""Choosing the offsets backend, once: the one place that reads `--offline` and `orchestrator`.

Each backend registers its factory here under its name, with what the daemon's guards say
before a writing action on a cluster it serves; `backend_for` picks one for a request (see
`offsetd.offsets.backend` for the protocol and how to add a backend).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from offsetd.offsets.backend import BackendRequest, OffsetsBackend, Refusal
from offsetd.offsets.offline.backend import offline_backend
from offsetd.offsets.operations import OffsetsService, rest_backend
from offsetd.offsets.strimzi.backend import strimzi_owner_check, strimzi_resources_backend
from offsetd.offsets.strimzi.manual import strimzi_backend, strimzi_refusal

__all__ = [
    "BACKENDS",
    "Registered",
    "backend_for",
    "backend_name",
    "connect_backend_for",
    "write_refusal_for",
]


def _writes(_connect_cluster: str) -> Refusal | None:
    return None


@dataclass(frozen=True)
class Registered:
    """A backend: how to build it, and whether it may change offsets of a cluster."""

    factory: Callable[[BackendRequest], OffsetsBackend[Any, Any]]
    refusal: Callable[[str], Refusal | None] = _writes


# name -> backend; a new backend adds one line here, and its case in `backend_name`.
BACKENDS: dict[str, Registered] = {
    "rest": Registered(rest_backend),
    "offline": Registered(lambda r: offline_backend(r, strimzi_owner_check(r))),
    "strimzi": Registered(strimzi_resources_backend),
    "strimzi-manual": Registered(strimzi_backend, strimzi_refusal),
}


def backend_name(orchestrator: str, *, offline: bool = False, kubernetes: bool = False) -> str:
    """Which backend serves a cluster: the command's flags first, then the cluster's config.

    `kubernetes`: the cluster has a `strimzi` section, so the `strimzi` backend asks the API
    whether Strimzi manages it (and serves it as `rest` when not). Without one, a cluster
    configured as Strimzi-run gets `strimzi-manual`: REST reads, writes refused with the steps.
    """
    if offline:
        return "offline"
    if kubernetes:
        return "strimzi"
    if orchestrator == "strimzi":
        return "strimzi-manual"
    return "rest"


def backend_for(request: BackendRequest) -> OffsetsBackend[Any, Any]:
    name = backend_name(
        request.orchestrator,
        offline=request.offline is not None,
        kubernetes=request.strimzi is not None,
    )
    return BACKENDS[name].factory(request)


def connect_backend_for(request: BackendRequest) -> OffsetsService:
    """The backend for a caller that changes offsets through the running workers (the
    daemon's actions): REST steps it can record one by one."""
    if request.offline is not None:
        raise ValueError("the daemon changes offsets through its Connect cluster, never offline")
    backend = backend_for(request)
    if not isinstance(backend, OffsetsService):
        raise TypeError(f"the {backend.name} backend has no REST steps")
    return backend


def write_refusal_for(
    connect_cluster: str, orchestrator: str, *, kubernetes: bool = False
) -> Refusal | None:
    """Why offsets of this cluster must not be changed by the daemon now (None: they may)."""
    return BACKENDS[backend_name(orchestrator, kubernetes=kubernetes)].refusal(connect_cluster)
