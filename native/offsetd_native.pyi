"""offsetd's compiled owner path (native/README.md): the Python engine is the reference."""

__version__: str

def event_roundtrip(text: str) -> str:
    """An event's `model_dump_json()` read into the compiled event and written back."""

# -- decoding (src/decode/): offsetd.events.frames.decode_frame, status.decode_status and
# dlq.decode_dlq. A topic is (Connect cluster, kind): kind "status" (decode_status), "dlq"
# (decode_dlq, no connector=), "offsets" (left to Python) or "shape" (the bench's copy topic:
# status and DLQ records told apart as bench.bench_daemon.is_status does). Records of topics not
# given are left to Python.

class Decoder:
    """A decoder with its memos (status keys and values, errors), for a stream of frames."""

    def __init__(self, topics: dict[str, tuple[str, str]]) -> None:
        """`topics`: topic -> (Connect cluster, kind); ValueError for an unknown kind."""

    def frame_events(self, frame: bytes) -> list[str | None]:
        """Per record of the frame, in order: its event's `model_dump_json()` text, or None
        when Python decodes it (it rejects it, or this side cannot be sure). ValueError when
        `decode_frame` raises Malformed for the frame."""

    def frame_event_count(self, frame: bytes) -> int:
        """How many records of the frame this side decodes into events (none written out as
        JSON): the decoding's own time, for the bench. ValueError for a broken frame."""

    def frame_outcomes(self, frame: bytes) -> list[tuple[str | None, str | None]]:
        """Per record: (its event's JSON, None), or (None, why Python decodes it: "malformed",
        "not decoded here", "big integer", "lone surrogate", "deep JSON", "long integer").
        ValueError for a broken frame."""

def decode_frame_events(frame: bytes, topics: dict[str, tuple[str, str]]) -> list[str | None]:
    """`Decoder(topics).frame_events(frame)`: per record its event's JSON or None (Python's)."""

def frame_fields(
    frame: bytes,
) -> list[tuple[str, int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    """A frame's records as `RawRecord`'s fields (topic, partition, offset, timestamp_ms, key,
    value, headers), in order; ValueError whenever `decode_frame` raises Malformed."""

def trace_first_line(head: str) -> tuple[str | None, str | None]:
    """`offsetd.events.decode.first_line(head)`: the outermost exception's class and message."""

def trace_last_cause(head: str) -> tuple[str, str | None] | None:
    """`offsetd.events.decode.last_cause(head)`: the last well-formed `Caused by:`'s class and
    message, or None."""

def char_class_ranges(name: str) -> list[tuple[int, int]]:
    """The inclusive code point ranges of Python's `\\w` ("word") or `\\s` ("space") as the
    decoder's tables hold them; ValueError for another name."""
