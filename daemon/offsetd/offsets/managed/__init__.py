"""A SKETCH of an offsets backend for a managed Connect service (not offered yet).

It proves the seam (`offsetd.offsets.backend`): a hosted Connect whose REST API differs from
Apache Kafka's — a base URL naming an environment and a cluster, bearer auth, offsets under the
service's own paths, a write that is a request the service applies later — needs only its own
reader and writer (`parts`); the one safe sequence (`offsetd.offsets.sequence`) runs over them
unchanged. It is registered in `offsetd.offsets.registry` under `managed`, but no command and no
configuration chooses it: its mover is REST's, and the API it speaks is modelled on one hosted
service's documentation and tested only against recorded answers
(`tests/unit/offsets/test_managed.py`).
"""

from __future__ import annotations

__all__: list[str] = []
