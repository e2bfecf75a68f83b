"""offsetd's compiled owner path (native/README.md): the Python engine is the reference."""

__version__: str

def event_roundtrip(text: str) -> str:
    """An event's `model_dump_json()` read into the compiled event and written back."""

class Matcher:
    """A rule set compiled for events (native/src/matcher): `RuleSet.matched`,
    `waiting_for_meta` and `meta_rules`, with Python's answers or none."""

    def __init__(self, program_json: str) -> None:
        """From `offsetd.rules.program.rule_program(rules)`; ValueError with the rule and the
        reason when a pattern cannot be matched exactly (a regex refused, ...)."""

    def matched(self, event_json: str, meta: tuple[str, str] | None) -> list[str] | None:
        """The names of the rules `event_json` matches, in load order, given the connector's
        (class, type); None when the answer is left to Python (undecided here)."""

    def waiting_for_meta(self, event_json: str) -> list[str] | None:
        """The names of the rules that need metadata and could match once it is known; None
        when left to Python."""

    @property
    def meta_rules(self) -> list[str]:
        """The names of the rules that need the connector's metadata, in load order."""

def classify(error_json: str | None) -> tuple[str, str] | None:
    """`offsetd.events.failures.classify` of an `ErrorInfo`'s JSON (None: no error): its
    (failure class, because), or None when Python's Unicode tables would decide."""

def failure_catalog() -> list[tuple[str, str]]:
    """The failure catalogue the classifier holds, in order: (class name or glob, failure)."""

def regex_matches(pattern: str, text: str, how: str) -> bool:
    """Whether the RE2 `pattern` matches `text` as the matcher runs it (`how`: "search" or
    "fullmatch"); ValueError with the reason when the pattern is refused."""

def glob_matches(pattern: str, name: str) -> bool:
    """`fnmatch.fnmatchcase(name, pattern)` as the matcher runs it; ValueError when Python
    could not compile the glob."""
