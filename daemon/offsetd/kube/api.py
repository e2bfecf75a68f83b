"""The Kubernetes API as offsetd uses it: get, list and patch Strimzi's resources and ConfigMaps
in one namespace, with field manager `offsetd`, as plain JSON-shaped data; create and patch the
events.k8s.io/v1 Events offsetd reports on them (`offsetd.remediation.kube_events`).

Every failure becomes `KubernetesError`: a 403 repeats the API server's own words, which name
the verb, the resource and the service account, and points at the shipped Role; a 401 names
where the credentials came from (the kubeconfig, or the pod's token file: offsetd.kube.login);
nothing of the credentials themselves is ever part of a message.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal, cast

import httpx2
from lightkube import ApiError, AsyncClient, ConfigError
from lightkube.generic_resource import GenericNamespacedResource, create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from offsetd.config.connect_clusters import StrimziAccess
from offsetd.errors import KubernetesError
from offsetd.kube.login import Login, load_login, refused

__all__ = [
    "FIELD_MANAGER",
    "GROUP",
    "KINDS",
    "Kind",
    "KubeApi",
    "open_kube",
]

GROUP = "kafka.strimzi.io"
FIELD_MANAGER = "offsetd"
Kind = Literal["KafkaConnect", "KafkaConnector", "KafkaMirrorMaker2"]
KINDS: dict[Kind, str] = {
    "KafkaConnect": "kafkaconnects",
    "KafkaConnector": "kafkaconnectors",
    "KafkaMirrorMaker2": "kafkamirrormaker2s",
}
_VERSIONS = ("v1", "v1beta2")  # Strimzi 1.x serves v1; 0.44-0.48 serve v1beta2
_ROLE_HINT = "grant it in the Role offsetd runs with (deploy/kubernetes/offsetd-role.yaml)"


def open_kube(access: StrimziAccess) -> KubeApi:
    """A client for `access`: its kubeconfig (and context), else $KUBECONFIG or ~/.kube/config,
    else the pod's service account (offsetd.kube.login)."""
    key = access.model_dump_json()
    if key not in _OPENED:
        _OPENED[key] = KubeApi(load_login(access))
    return _OPENED[key]


_OPENED: dict[str, KubeApi] = {}


class KubeApi:
    """One namespace of one API server; Strimzi kinds at the served version.

    The httpx client under lightkube belongs to one event loop, so one is opened per loop (the
    daemon has one; a CLI command or a test may run several in turn).
    """

    def __init__(self, login: Login) -> None:
        self.login = login
        self.config = login.config
        self.namespace = login.namespace
        self._version: str | None = None
        self._clients: dict[int, AsyncClient] = {}

    @property
    def client(self) -> AsyncClient:
        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients[loop] = AsyncClient(
                config=self.config, namespace=self.namespace, field_manager=FIELD_MANAGER
            )
        return self._clients[loop]

    async def strimzi_version(self) -> str:
        """The kafka.strimzi.io version the server serves, asked once (v1 before v1beta2)."""
        if self._version is None:
            for version in _VERSIONS:
                kind = create_namespaced_resource(GROUP, version, "KafkaConnect", "kafkaconnects")
                try:
                    async for _ in self.client.list(kind, namespace=self.namespace, chunk_size=1):
                        break
                except ApiError as exc:
                    if exc.status.code == 404:
                        continue
                    raise self._error(exc, "list", f"kafkaconnects.{GROUP}") from None
                except httpx2.HTTPStatusError as exc:  # an unserved version: a plain-text 404
                    if exc.response.status_code == 404:
                        continue
                    raise self._unreachable(exc) from None
                except (httpx2.HTTPError, ConfigError) as exc:
                    raise self._unreachable(exc) from None
                self._version = version
                break
            else:
                raise KubernetesError(
                    f"the Kubernetes API serves no {GROUP} version of {_VERSIONS}: "
                    "are Strimzi's CRDs installed?"
                )
        return self._version

    async def _kind(self, kind: Kind) -> type[GenericNamespacedResource]:
        return create_namespaced_resource(GROUP, await self.strimzi_version(), kind, KINDS[kind])

    async def get(self, kind: Kind, name: str) -> dict[str, Any]:
        try:
            return _plain(await self.client.get(await self._kind(kind), name))
        except ApiError as exc:
            raise self._error(exc, "get", f"{KINDS[kind]}.{GROUP} {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None

    async def list(self, kind: Kind) -> list[dict[str, Any]]:
        try:
            return [_plain(r) async for r in self.client.list(await self._kind(kind))]
        except ApiError as exc:
            raise self._error(exc, "list", f"{KINDS[kind]}.{GROUP}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None

    async def patch(
        self, kind: Kind, name: str, body: Any, *, json_patch: bool = False
    ) -> dict[str, Any]:
        """A JSON merge patch (dict) or a JSON patch (list of operations, `json_patch=True`)."""
        patch_type = PatchType.JSON if json_patch else PatchType.MERGE
        try:
            return _plain(
                await self.client.patch(await self._kind(kind), name, body, patch_type=patch_type)
            )
        except ApiError as exc:
            raise self._error(exc, "patch", f"{KINDS[kind]}.{GROUP} {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None

    async def configmap_data(self, name: str) -> dict[str, str] | None:
        """The ConfigMap's data; None when there is no such ConfigMap."""
        try:
            found = await self.client.get(ConfigMap, name)
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise self._error(exc, "get", f"configmaps {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None
        return dict(found.data or {})

    async def put_configmap(self, name: str, data: dict[str, str], labels: dict[str, str]) -> None:
        """Create the ConfigMap, or merge `data` into the existing one."""
        try:
            await self.client.create(
                ConfigMap(metadata=ObjectMeta(name=name, labels=labels), data=data)
            )
            return
        except ApiError as exc:
            if exc.status.code != 409:
                raise self._error(exc, "create", f"configmaps {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None
        try:
            await self.client.patch(ConfigMap, name, {"data": data}, patch_type=PatchType.MERGE)
        except ApiError as exc:
            raise self._error(exc, "patch", f"configmaps {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None

    def _error(self, exc: ApiError, verb: str, what: str) -> KubernetesError:
        code = exc.status.code
        words = exc.status.message or exc.status.reason or "no message"
        if code == 401:
            return refused(self.login, verb, what, words)
        if code == 403:
            return KubernetesError(f"Kubernetes refused to {verb} {what}: {words}; {_ROLE_HINT}",
                                   status=code)  # fmt: skip
        retriable = code in (409, 429) or (code is not None and code >= 500)
        return KubernetesError(
            f"Kubernetes could not {verb} {what} ({code}): {words}",
            status=code,
            retriable=retriable,
        )

    def _unreachable(self, exc: httpx2.HTTPError | ConfigError) -> KubernetesError:
        if isinstance(exc, ConfigError):  # the token file went away under a running client
            return KubernetesError(f"cannot read {self.login.source}: {exc}")
        return KubernetesError(
            f"the Kubernetes API could not be reached: {type(exc).__name__}: {exc}",
            retriable=True,
        )

    async def create_event(self, body: dict[str, Any]) -> None:
        """Create an events.k8s.io/v1 Event from its JSON body (times already MicroTime strings:
        the body is passed through as written, so the server sees exactly those)."""
        name = str(body.get("metadata", {}).get("name", ""))
        try:
            await self.client.create(cast(Event, Event.from_dict(body)))
        except ApiError as exc:
            raise self._error(exc, "create", f"events.events.k8s.io {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None

    async def patch_event(self, name: str, body: dict[str, Any]) -> None:
        """A JSON merge patch of an Event (its series and annotations: the rest is immutable)."""
        try:
            await self.client.patch(Event, name, body, patch_type=PatchType.MERGE)
        except ApiError as exc:
            raise self._error(exc, "patch", f"events.events.k8s.io {name}") from None
        except (httpx2.HTTPError, ConfigError) as exc:
            raise self._unreachable(exc) from None


def _plain(resource: Any) -> dict[str, Any]:
    return dict(resource.to_dict())
