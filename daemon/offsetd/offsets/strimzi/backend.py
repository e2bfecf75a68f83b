"""The `strimzi` offsets backend: the safe sequence, driven through Strimzi's resources.

Strimzi drives each connector back to its resource's `spec.state` at every reconcile, so a REST
stop would be resumed under a running change. This backend is the one sequence
(`offsetd.offsets.sequence.ChangeSequence`) over Strimzi's parts (`parts`):

snapshot (durable) -> `spec.state: stopped` -> wait until REST shows STOPPED with no tasks ->
write the offsets ConfigMap -> `alterOffsets.fromConfigMap` + `strimzi.io/connector-offsets=alter`
(or `=reset`) -> wait until the operator removed the annotation, failing on its warning
condition -> read back through `listOffsets` (`=list`, the ConfigMap it writes) -> restore the
previous `spec.state` -> verify through REST.

Whether a cluster is Strimzi-managed is asked of the Kubernetes API once (`site.StrimziSite`):
a cluster whose KafkaConnect does not use connector resources is served exactly as `rest` (each
part hands it to its REST part). A resource that a GitOps controller owns is refused unless
`allow_gitops_managed` (the controller would put `spec.state` back as Strimzi puts REST back).
Writes use field manager `offsetd`; `strimzi.io/pause-reconciliation` is never used, so it can
never be left behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.errors import StrimziManaged
from offsetd.kube.api import open_kube
from offsetd.offsets.backend import BackendRequest, Parts, Timeouts
from offsetd.offsets.sequence import ChangeSequence
from offsetd.offsets.strimzi.parts import StrimziMover, StrimziReader, StrimziRoute, StrimziWriter
from offsetd.offsets.strimzi.resources import PRIOR_STATES
from offsetd.offsets.strimzi.site import StrimziSite

__all__ = [
    "PRIOR_STATES",
    "strimzi_owner_check",
    "strimzi_parts",
    "strimzi_resources_backend",
    "strimzi_site",
]


def strimzi_site(request: BackendRequest, access: StrimziAccess) -> StrimziSite:
    """The cluster's resources as one backend drives them (one per backend: its cache)."""
    return StrimziSite(
        open_kube(access),
        access,
        connect_cluster=request.connect_cluster,
        url=request.client.url,
        configured=request.orchestrator == "strimzi",
        poll_s=(request.timeouts or Timeouts()).poll_s,
        log=request.log,
    )


def strimzi_parts(request: BackendRequest, site: StrimziSite) -> Parts:
    client = request.client
    return Parts(
        "strimzi",
        client,
        StrimziReader(site, client),
        StrimziWriter(site, client),
        StrimziMover(site, client),
        StrimziRoute(site, site.access),
    )


def strimzi_owner_check(request: BackendRequest) -> Callable[[str], Awaitable[None]] | None:
    """For another backend's writes on this cluster (`--offline`): refuse a connector that a
    Strimzi resource describes, naming the resource; None without Strimzi access."""
    access = request.strimzi
    if access is None:
        return None
    site = strimzi_site(request, access)

    async def check(connector: str) -> None:
        found = await site.locate(connector)
        if found is not None:
            raise StrimziManaged(
                f"{connector} is managed by Strimzi through {found.label} in namespace "
                f"{site.api.namespace}: a write that bypasses it would be undone at the "
                "operator's next reconcile; change it through that resource — run the same "
                "command without --offline and offsetd drives it"
            )

    return check


def strimzi_resources_backend(request: BackendRequest) -> ChangeSequence:
    """The `strimzi` backend (offsetd.offsets.registry): needs the cluster's `strimzi` access."""
    access = request.strimzi
    if access is None:
        raise ValueError(f"Connect cluster {request.connect_cluster} has no strimzi access")
    return ChangeSequence.for_request(
        request, strimzi_parts(request, strimzi_site(request, access))
    )
