"""Rule-supplied record checks, as remediation knows them: re-exported from `offsetd.recordchecks`.

The checks are vocabulary shared with the rules (which sit below remediation), so they live in
the base module; this name stays for the locator, the quarantine copy and their tests.
"""

from offsetd.recordchecks import (
    MATCH_LIMIT_BYTES,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    KafkaRecord,
    KeyMatches,
    NotJson,
    RecordCheck,
    TooLarge,
    ValueMatches,
    describe,
    fails,
)

__all__ = [
    "MATCH_LIMIT_BYTES",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "KafkaRecord",
    "KeyMatches",
    "NotJson",
    "RecordCheck",
    "TooLarge",
    "ValueMatches",
    "describe",
    "fails",
]
