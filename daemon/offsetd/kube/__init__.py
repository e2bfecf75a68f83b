"""offsetd's Kubernetes seam: one namespaced client of the API server (lightkube) with errors
an operator can act on, and the Strimzi resource kinds at the version the server serves."""

from __future__ import annotations

__all__: list[str] = []
