"""The offsets toolkit: every offset operation on Kafka Connect and MirrorMaker 2, done safely.

One library for the CLI (`offsetd offsets ...`) and the daemon; the daemon has no second way of
changing offsets.
"""

__all__: list[str] = []
