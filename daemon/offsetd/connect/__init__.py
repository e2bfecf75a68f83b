"""Kafka Connect's REST API, as offsetd uses it."""

__all__: list[str] = []
