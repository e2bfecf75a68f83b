"""Offsets of a Strimzi-managed Connect cluster.

`backend`: the `strimzi` backend, which changes offsets by driving the KafkaConnector and
KafkaMirrorMaker2 resources through the Kubernetes API (`offsetd.kube`); `resources`: finding
the resource behind a connector and the patches that drive it; `manual`: the `strimzi-manual`
backend for a cluster configured as Strimzi-run without Kubernetes access, which reads through
REST and refuses writes with the steps to do them by hand.
"""

from __future__ import annotations

__all__: list[str] = []
