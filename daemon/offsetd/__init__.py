"""offsetd: event-driven offset automation for Kafka Connect and MirrorMaker 2."""

__all__: list[str] = []

__version__ = "0.1.0"
