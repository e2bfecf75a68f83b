"""offsetd's compiled owner path (native/README.md): the Python engine is the reference."""

__version__: str

def event_roundtrip(text: str) -> str:
    """An event's `model_dump_json()` read into the compiled event and written back."""
