"""Choosing the offsets backend, once: the one place that reads `--offline` and the cluster's
orchestrator and access.

Each backend registers its factory here under its name, with what the daemon's guards say
before a writing action on a cluster it serves; `backend_for` picks one for a request (see
`offsetd.offsets.backend` for the protocol and how to add a backend), `stepwise_backend_for`
one that the daemon's sagas can drive step by step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

from offsetd.offsets.backend import (
    BackendRequest,
    ClusterConfig,
    OffsetsBackend,
    Refusal,
    StepwiseBackend,
)
from offsetd.offsets.managed.parts import managed_backend
from offsetd.offsets.offline.backend import offline_backend
from offsetd.offsets.operations import rest_backend
from offsetd.offsets.strimzi.backend import strimzi_owner_check, strimzi_resources_backend
from offsetd.offsets.strimzi.manual import strimzi_backend, strimzi_refusal

__all__ = [
    "BACKENDS",
    "Registered",
    "backend_for",
    "backend_name",
    "stepwise_backend_for",
    "write_refusal_for",
]


def _writes(_connect_cluster: str) -> Refusal | None:
    return None


@dataclass(frozen=True)
class Registered:
    """A backend: how to build it, whether it may change offsets of a cluster, and (`steps`)
    how to build it for a caller that drives the change step by step (None: it cannot)."""

    factory: Callable[[BackendRequest], OffsetsBackend[Any, Any]]
    refusal: Callable[[str], Refusal | None] = _writes
    steps: Callable[[BackendRequest], StepwiseBackend] | None = None

    @classmethod
    def stepwise(
        cls,
        factory: Callable[[BackendRequest], StepwiseBackend],
        refusal: Callable[[str], Refusal | None] = _writes,
    ) -> Self:
        return cls(factory, refusal, factory)


# name -> backend; a new backend adds one line here, and its case in `backend_name`.
BACKENDS: dict[str, Registered] = {
    "rest": Registered.stepwise(rest_backend),
    "offline": Registered(lambda r: offline_backend(r, strimzi_owner_check(r))),
    "strimzi": Registered.stepwise(strimzi_resources_backend),
    "strimzi-manual": Registered.stepwise(strimzi_backend, strimzi_refusal),
    "managed": Registered.stepwise(managed_backend),  # a sketch: no config chooses it yet
}


def backend_name(request: BackendRequest) -> str:
    """Which backend serves a request: the command's flags first, then the cluster's config.

    With Kubernetes access (the cluster's `strimzi` section) the `strimzi` backend asks the API
    whether Strimzi manages it (and serves it as `rest` when not). Without one, a cluster
    configured as Strimzi-run gets `strimzi-manual`: REST reads, writes refused with the steps.
    (A managed Connect service would be chosen here from its own config section; the
    `offsetd.offsets.managed` sketch is not offered yet.)
    """
    if request.offline is not None:
        return "offline"
    return _configured(request.orchestrator, kubernetes=request.strimzi is not None)


def _configured(orchestrator: str, *, kubernetes: bool) -> str:
    if kubernetes:
        return "strimzi"
    if orchestrator == "strimzi":
        return "strimzi-manual"
    return "rest"


def backend_for(request: BackendRequest) -> OffsetsBackend[Any, Any]:
    return BACKENDS[backend_name(request)].factory(request)


def stepwise_backend_for(request: BackendRequest) -> StepwiseBackend:
    """The backend for a caller that changes offsets through the running workers one step at
    a time (the daemon's actions, `offsets import`/`export`)."""
    name = backend_name(request)
    steps = BACKENDS[name].steps
    if steps is None:
        raise ValueError(f"the {name} backend changes offsets in one go, not step by step")
    return steps(request)


def write_refusal_for(connect_cluster: str, cluster: ClusterConfig | str | None) -> Refusal | None:
    """Why offsets of this cluster must not be changed by the daemon now (None: they may).
    `cluster`: its config (or just its orchestrator's name; None: a cluster offsetd does not
    know)."""
    if isinstance(cluster, str):
        name = _configured(cluster, kubernetes=False)
    else:
        strimzi = cluster.strimzi if cluster is not None else None
        orchestrator = cluster.orchestrator if cluster is not None else "none"
        name = _configured(orchestrator, kubernetes=strimzi is not None)
    return BACKENDS[name].refusal(connect_cluster)
