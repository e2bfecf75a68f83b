"""The embedded local stack: two KRaft Kafka clusters, a Connect worker with MM2, all on loopback.

It exists so that every offsetd feature is proven against real Kafka and real Connect processes
that the project starts itself (no Docker). Nothing here is used by the daemon in production.
"""

__all__: list[str] = []
