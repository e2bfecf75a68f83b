"""Events: what Connect reports about itself, as typed, frozen values (pure; no I/O imports)."""

__all__: list[str] = []
