"""One Connect cluster's Strimzi resources, as one backend drives them.

The KafkaConnect is found once per backend. Each connector's KafkaConnector (or its place in a
KafkaMirrorMaker2) is located once per change — when it is planned, or at the first move of a
connector no plan located — and then carried: every patch offsetd makes answers with the
resource as it now is, and so does every read while the operator acts on an annotation, so the
steps of a change never search for it again. A move that is not part of a change (a restart, a
config change, the autoRestart question) locates afresh: someone may have edited the resource.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.errors import ChangeIncomplete, ConnectorRejected, StrimziManaged
from offsetd.kube.api import KubeApi
from offsetd.offsets.strimzi.resources import (
    OFFSETS_ANNOTATION,
    PRIOR_STATES,
    ConnectorResource,
    ConnectResource,
    find_connect,
    locate,
    reread,
    with_doc,
)

__all__ = ["StrimziSite"]

_REASONS = {"alter": "AlterOffsets", "reset": "ResetOffsets", "list": "ListOffsets"}


class StrimziSite:
    """The resources behind one Connect cluster, and the patches and waits that drive them."""

    def __init__(
        self,
        api: KubeApi,
        access: StrimziAccess,
        *,
        connect_cluster: str,
        url: str,
        configured: bool,
        poll_s: float,
        log: Callable[[str], None] = lambda _msg: None,
    ) -> None:
        self.api = api
        self.access = access
        self.connect_cluster = connect_cluster
        self.url = url
        self.configured = configured  # orchestrator: strimzi — not finding it is an error
        self.poll_s = poll_s
        self.log = log
        self._connect: ConnectResource | None = None
        self._detected = False
        self._found: dict[str, ConnectorResource] = {}

    async def managed_by(self) -> ConnectResource | None:
        """The KafkaConnect managing this cluster, asked of the API once (None: not Strimzi)."""
        if not self._detected:
            self._connect = await find_connect(
                self.api, name=self.access.kafka_connect, url=self.url, alias=self.connect_cluster
            )
            if self._connect is None and self.configured:
                raise StrimziManaged(
                    f"Connect cluster {self.connect_cluster} is configured as Strimzi-managed, "
                    f"but namespace {self.api.namespace} has no KafkaConnect "
                    f"{self.access.kafka_connect or f'with status URL {self.url}'} that uses "
                    'connector resources (strimzi.io/use-connector-resources: "true"); '
                    "nothing was changed"
                )
            self._detected = True
            if self._connect is not None:
                self.log(
                    f"Connect cluster {self.connect_cluster} is managed by Strimzi "
                    f"(KafkaConnect {self.api.namespace}/{self._connect.name})"
                )
        return self._connect

    async def locate(self, connector: str) -> ConnectorResource | None:
        """The connector's resource as it is now, kept for the change; None when the cluster
        is not Strimzi's (StrimziManaged when it is and no resource describes the connector)."""
        connect = await self.managed_by()
        if connect is None:
            return None
        found = self._found[connector] = await locate(self.api, connect, connector)
        return found

    async def resource(self, connector: str) -> ConnectorResource | None:
        """The connector's resource as this change knows it (located if it was not yet)."""
        known = self._found.get(connector)
        return known if known is not None else await self.locate(connector)

    def _keep(self, found: ConnectorResource) -> ConnectorResource:
        self._found[found.connector] = found
        return found

    async def reread(self, found: ConnectorResource) -> ConnectorResource:
        return self._keep(await reread(self.api, found))

    async def patch(
        self, found: ConnectorResource, body: Any, *, json_patch: bool = False
    ) -> ConnectorResource:
        """Patch the resource (field manager offsetd); the answer is the resource kept."""
        patched = await self.api.patch(found.kind, found.name, body, json_patch=json_patch)
        return self._keep(with_doc(found, patched))

    async def set_spec(self, found: ConnectorResource, field: str, value: Any) -> ConnectorResource:
        operations = found.spec_patch(field, value)
        if not operations:
            return found
        return await self.patch(found, operations, json_patch=True)

    async def set_priors(
        self, found: ConnectorResource, priors: dict[str, str | None]
    ) -> ConnectorResource:
        value = json.dumps(priors, sort_keys=True) if priors else None
        return await self.patch(found, {"metadata": {"annotations": {PRIOR_STATES: value}}})

    async def operate(self, found: ConnectorResource, operation: str) -> ConnectorResource:
        """Annotate, then wait until the operator took the annotation away (done) or wrote a
        warning condition about it (refused: the annotation is taken back, nothing retries)."""
        patched = await self.patch(
            found, {"metadata": {"annotations": found.offsets_annotations(operation)}}
        )
        version = patched.resource["metadata"]["resourceVersion"]
        reason = _REASONS[operation]
        last = patched

        async def done() -> bool:
            nonlocal last
            last = await self.reread(last)
            if OFFSETS_ANNOTATION not in last.annotations:
                return True
            newer = last.resource["metadata"]["resourceVersion"] != version
            refused = [w for w in last.warnings() if reason in w or "ManageOffsets" in w]
            if newer and refused:
                await self.take_back(last)
                raise ConnectorRejected(
                    f"Strimzi refused {OFFSETS_ANNOTATION}={operation} on {found.label}: "
                    + "; ".join(refused)
                )
            return False

        async def take_back() -> None:
            await self.take_back(last)

        await self.await_operator(
            f"act on {OFFSETS_ANNOTATION}={operation} on {found.label}", done, take_back
        )
        return last

    async def annotate_and_wait(
        self, found: ConnectorResource, key: str, value: str
    ) -> ConnectorResource:
        last = await self.patch(found, {"metadata": {"annotations": {key: value}}})

        async def taken_away() -> bool:
            nonlocal last
            last = await self.reread(last)
            return key not in last.annotations

        await self.await_operator(f"act on {key}={value} on {found.label}", taken_away)
        return last

    async def await_operator(
        self,
        what: str,
        done: Callable[[], Awaitable[bool]],
        give_up: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Poll `done` until it holds; past `operator_timeout`, `give_up` and say so."""
        limit_s = self.access.operator_timeout / 1000
        deadline = time.monotonic() + limit_s
        while not await done():
            if time.monotonic() >= deadline:
                if give_up is not None:
                    await give_up()
                raise ChangeIncomplete(
                    f"Strimzi did not {what} within {limit_s:g} s (is its operator running?)"
                )
            await asyncio.sleep(self.poll_s)

    async def take_back(self, found: ConnectorResource) -> None:
        await self.patch(found, {"metadata": {"annotations": found.offsets_annotations(None)}})
