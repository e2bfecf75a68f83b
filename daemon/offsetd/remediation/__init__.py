"""Safe remediation: locating the poison record, quarantining it, and the skip saga around them."""

__all__: list[str] = []
