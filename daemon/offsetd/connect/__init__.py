"""Kafka Connect's REST API, as offsetd uses it."""
