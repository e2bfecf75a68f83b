"""Offsets of a Strimzi-managed Connect cluster.

`backend`: the `strimzi` backend — the one safe sequence over `parts` that move connectors and
their offsets through the KafkaConnector and KafkaMirrorMaker2 resources (`offsetd.kube`), and
hand a connector no resource describes to the REST parts; `site`: the cluster's resources as
one backend drives them (each connector's located once per change); `resources`: finding the
resource behind a connector and the patches that drive it; `manual`: the `strimzi-manual`
backend for a cluster configured as Strimzi-run without Kubernetes access, which reads through
REST and refuses writes with the steps to do them by hand.
"""

from __future__ import annotations

__all__: list[str] = []
