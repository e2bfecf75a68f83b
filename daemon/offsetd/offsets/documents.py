"""Offsets documents in and out: KIP-199's export format and Strimzi's ConfigMaps; validation.

The export document is the one KIP-199 proposed, `{"<connector>": [{"partition", "offset"}]}`.
Strimzi reads one ConfigMap per connector holding `{"offsets": [...]}` under `offsets.json`
(KafkaConnector) or `<source>--<target>.<Type>.json` (a KafkaMirrorMaker2 connector, whose name
`<source>-><target>.<Type>` cannot be a ConfigMap key).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError
from ruamel.yaml.error import YAMLError

from offsetd.errors import InvalidDocument
from offsetd.offsets.model import ConnectorKind, JsonScalar, OffsetEntry
from offsetd.yamlerrors import expansion_problem

__all__ = [
    "CONFIGMAP_KEY",
    "configmap_key",
    "configmap_name",
    "configmaps",
    "connector_from_configmap_key",
    "export_document",
    "parse_document",
    "validate_entries",
]

CONFIGMAP_KEY = "offsets.json"
_MM2_NAME = re.compile(r"^(?P<source>[^>]+)->(?P<target>[^.]+)\.(?P<type>Mirror\w+Connector)$")


# -- validation ---------------------------------------------------------------------------------

_FIELDS: dict[ConnectorKind, tuple[dict[str, type], dict[str, type]]] = {
    ConnectorKind.SINK: ({"kafka_topic": str, "kafka_partition": int}, {"kafka_offset": int}),
    ConnectorKind.MIRROR_SOURCE: (
        {"cluster": str, "topic": str, "partition": int},
        {"offset": int},
    ),
    ConnectorKind.MIRROR_CHECKPOINT: (
        {"group": str, "topic": str, "partition": int},
        {"offset": int},
    ),
    ConnectorKind.MIRROR_HEARTBEAT: (
        {"sourceClusterAlias": str, "targetClusterAlias": str},
        {"offset": int},
    ),
}


def validate_entries(connector: str, kind: ConnectorKind, raw: Any) -> list[OffsetEntry]:
    """Check a connector's entries against its type; return them normalised (ints as ints).

    Errors name the connector, the entry and what is wrong, and are collected, not first-only.
    """
    if not isinstance(raw, list):
        raise InvalidDocument(
            f"{connector}: offsets must be a list of {{partition, offset}} entries"
        )
    problems: list[str] = []
    entries: list[OffsetEntry] = []
    seen: set[str] = set()
    for index, item in enumerate(raw):
        where = f"{connector}, entry {index}"
        try:
            entry = _entry(kind, item)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if entry.key in seen:
            problems.append(f"{where}: partition {entry.key} is listed twice")
        seen.add(entry.key)
        entries.append(entry)
    if problems:
        raise InvalidDocument("invalid offsets document:\n  " + "\n  ".join(problems))
    return entries


def _entry(kind: ConnectorKind, item: Any) -> OffsetEntry:
    if not isinstance(item, Mapping) or set(item) != {"partition", "offset"}:
        raise ValueError("each entry must be an object with exactly 'partition' and 'offset'")
    partition, offset = item["partition"], item["offset"]
    if not isinstance(partition, Mapping) or not partition:
        raise ValueError("'partition' must be a non-empty object")
    if offset is not None and not isinstance(offset, Mapping):
        raise ValueError("'offset' must be an object, or null to remove the partition")
    if kind is ConnectorKind.SOURCE:
        return OffsetEntry(_primitives(partition, "partition"), _optional(offset, "offset"))
    partition_fields, offset_fields = _FIELDS[kind]
    clean_partition = _typed(partition, partition_fields, "partition")
    if offset is None:
        return OffsetEntry(clean_partition, None)
    clean_offset = _typed(offset, offset_fields, "offset")
    pinned = kind in (ConnectorKind.MIRROR_CHECKPOINT, ConnectorKind.MIRROR_HEARTBEAT)
    if pinned and clean_offset["offset"] != 0:
        raise ValueError(f"{kind} offsets can only be 0 or null (got {clean_offset['offset']})")
    return OffsetEntry(clean_partition, clean_offset)


def _typed(value: Mapping[str, Any], fields: dict[str, type], what: str) -> dict[str, JsonScalar]:
    if set(value) != set(fields):
        raise ValueError(f"'{what}' must have exactly the keys {', '.join(sorted(fields))}")
    out: dict[str, JsonScalar] = {}
    for key, wanted in fields.items():
        item = value[key]
        if wanted is int:
            out[key] = _non_negative_int(item, f"{what}.{key}")
        elif not isinstance(item, str) or not item:
            raise ValueError(f"{what}.{key} must be a non-empty string")
        else:
            out[key] = item
    return out


def _non_negative_int(value: Any, where: str) -> int:
    # Connect accepts numbers and numeric strings for these fields.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{where} must be a non-negative integer (got {value!r})")
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{where} must be a non-negative integer (got {value!r})") from None
    if number < 0:
        raise ValueError(f"{where} must be a non-negative integer (got {number})")
    return number


def _primitives(value: Mapping[str, Any], where: str) -> dict[str, JsonScalar]:
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValueError(f"{where} keys must be strings")
        if item is not None and not isinstance(item, str | int | float | bool):
            raise ValueError(f"{where}.{key} must be a primitive value (string, number, boolean)")
    return dict(value)


def _optional(value: Mapping[str, Any] | None, where: str) -> dict[str, JsonScalar] | None:
    return None if value is None else _primitives(value, where)


# -- reading documents --------------------------------------------------------------------------


def parse_document(text: str, *, connector: str | None = None) -> dict[str, Any]:
    """Connector name -> raw entries, from any accepted input (validation is separate).

    Accepted: the KIP-199 export document; Connect's own `{"offsets": [...]}` (needs
    `connector`); a Strimzi ConfigMap (JSON or YAML), whose MM2 keys carry the connector name.
    """
    data = _load(text)
    if isinstance(data, Mapping) and data.get("kind") == "ConfigMap":
        return _from_configmap(data, connector)
    if isinstance(data, Mapping) and set(data) == {"offsets"}:
        if connector is None:
            raise InvalidDocument(
                'the document is one connector\'s {"offsets": [...]}: name it with --connector'
            )
        return {connector: data["offsets"]}
    if not isinstance(data, Mapping) or not data:
        raise InvalidDocument(
            'expected {"<connector>": [{"partition": {...}, "offset": {...}}, ...]} '
            "or a Strimzi ConfigMap"
        )
    if connector is not None and set(data) != {connector}:
        raise InvalidDocument(f"--connector {connector} does not match the document's connectors")
    return {str(name): entries for name, entries in data.items()}


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        raise InvalidDocument("the document is nested too deeply") from None
    try:
        docs = [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except RecursionError:
        raise InvalidDocument("the document is nested too deeply") from None
    except ConstructorError as exc:  # a tag the safe loader does not construct: data only
        mark = exc.problem_mark
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidDocument(f"the document holds a YAML tag that is not data{line}") from None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise InvalidDocument(f"the document is neither JSON nor YAML{line}") from None
    refused = expansion_problem(docs, len(text))
    if refused is not None:
        raise InvalidDocument(f"the document is {refused}")
    if len(docs) > 1:  # several ConfigMaps, as `export --format strimzi-configmap` writes them
        if not all(isinstance(d, Mapping) and d.get("kind") == "ConfigMap" for d in docs):
            raise InvalidDocument("a multi-document YAML stream must hold only ConfigMaps")
        merged = [(k, v) for d in docs for k, v in (d.get("data") or {}).items()]
        keys = [k for k, _ in merged]
        if len(set(keys)) != len(keys):
            raise InvalidDocument("the ConfigMaps repeat a key: import them one at a time")
        return {"kind": "ConfigMap", "data": dict(merged)}
    return docs[0] if docs else None


def _from_configmap(data: Mapping[str, Any], connector: str | None) -> dict[str, Any]:
    items = data.get("data") or {}
    if not isinstance(items, Mapping) or not items:
        raise InvalidDocument("the ConfigMap has no data")
    out: dict[str, Any] = {}
    for key, value in items.items():
        name = connector_from_configmap_key(str(key), connector)
        try:
            body = json.loads(value)
        except (TypeError, ValueError):
            raise InvalidDocument(f"ConfigMap key {key} does not hold JSON") from None
        if not isinstance(body, Mapping) or "offsets" not in body:
            raise InvalidDocument(f'ConfigMap key {key} must hold {{"offsets": [...]}}')
        out[name] = body["offsets"]
    return out


def connector_from_configmap_key(key: str, connector: str | None) -> str:
    if key == CONFIGMAP_KEY:
        if connector is None:
            raise InvalidDocument(
                "a KafkaConnector ConfigMap (key offsets.json) does not name its connector: "
                "add --connector"
            )
        return connector
    if key.endswith(".json") and "--" in key:
        if connector is not None:
            if configmap_key(connector) != key:
                raise InvalidDocument(f"--connector {connector} does not match ConfigMap key {key}")
            return connector
        stem = key.removesuffix(".json")
        if stem.count("--") != 1:
            # Strimzi wrote `->` as `--`; with another `--` in an alias the way back is ambiguous.
            raise InvalidDocument(
                f"ConfigMap key {key} is ambiguous: name the connector with --connector"
            )
        return stem.replace("--", "->")
    raise InvalidDocument(
        f"ConfigMap key {key} is neither offsets.json nor <source>--<target>.<Connector>.json"
    )


# -- writing documents --------------------------------------------------------------------------


def export_document(offsets: Mapping[str, list[OffsetEntry]]) -> dict[str, Any]:
    return {name: [e.as_json() for e in entries] for name, entries in sorted(offsets.items())}


def configmap_key(connector: str) -> str:
    """`offsets.json`, or for a Strimzi KafkaMirrorMaker2 connector `<src>--<tgt>.<Type>.json`."""
    if _MM2_NAME.match(connector):
        return connector.replace("->", "--", 1) + ".json"
    return CONFIGMAP_KEY


def configmap_name(connector: str) -> str:
    """A valid Kubernetes object name (DNS-1123 subdomain) derived from the connector name.

    Characters a name cannot hold become `-`, runs of separators collapse, and when that changed
    the name, a short hash of the original keeps two connectors (`My_Sink`, `my-sink`) apart.
    """
    readable = connector.replace("->", "--")
    base = re.sub(r"[^a-z0-9.-]+", "-", readable.lower())
    base = re.sub(r"[.-]*\.[.-]*", ".", base)  # no empty labels: '..', '.-', '-.'
    base = re.sub(r"-{3,}", "--", base).strip("-.")[:200].rstrip("-.")
    if base != readable.lower():
        digest = hashlib.sha256(connector.encode()).hexdigest()[:8]
        base = f"{base}-{digest}" if base else f"connector-{digest}"
    return f"{base}-offsets"


def configmaps(offsets: Mapping[str, list[OffsetEntry]]) -> str:
    """One ConfigMap per connector, as a multi-document YAML stream.

    Written directly rather than through a YAML library: the shape is fixed, the name and key
    are plain DNS/key characters, and the JSON goes into a literal block, which takes any line.
    A YAML dumper needed about a second for a 10k-partition connector.
    """
    docs = []
    for name, entries in sorted(offsets.items()):
        body = json.dumps({"offsets": [e.as_json() for e in entries]}, indent=2)
        block = "\n".join("    " + line for line in body.splitlines())
        docs.append(
            "apiVersion: v1\n"
            "kind: ConfigMap\n"
            "metadata:\n"
            f"  name: {configmap_name(name)}\n"
            "data:\n"
            f"  {configmap_key(name)}: |\n"
            f"{block}\n"
        )
    return "---\n".join(docs)
