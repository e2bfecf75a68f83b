"""Prometheus metrics offsetd exports about itself (and, later, about MirrorMaker 2)."""

__all__: list[str] = []
