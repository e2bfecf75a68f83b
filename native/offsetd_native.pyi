"""offsetd's compiled owner path (native/README.md): the Python engine is the reference."""

from collections.abc import Callable
from typing import Any

__version__: str

def event_roundtrip(text: str) -> str:
    """An event's `model_dump_json()` read into the compiled event and written back."""

class Framer:
    """The ingest's framing (`offsetd.ingest`, `offsetd.events.frames`), byte for byte."""

    def __init__(
        self,
        sources: dict[str, tuple[str, str, bool]],
        max_frame_bytes: int,
        max_record_bytes: int,
    ) -> None:
        """`sources`: topic -> (Connect cluster, route, dlq); route: "status", "dlq",
        "status_or_dlq" or "python" (the callback routes every record)."""

    def plan(
        self, batch: list[Any], route: Callable[[int], str | None]
    ) -> tuple[
        list[tuple[str, bytes, int]],
        list[tuple[int, int]],
        list[int],
        dict[tuple[str, int], int],
    ]:
        """A consumed batch's frames (owner, value, records), the records too large for any
        frame (index, framed size), the messages that carry an error (index), and each
        partition's next offset. `route(index)`: the Python router's owner for a record this
        cannot route, or None (it reported the record)."""
