"""What kind of failure a Connect error is, and so whether a restart can help.

A restart helps only when the cause can go away by itself. Strimzi's `autoRestart` restarts
every failure alike; offsetd ships a judgement, read from the exception classes of the trace
(the outer exception and every `Caused by:`), which Kafka Connect and its connectors throw for
the reasons below (read from their public sources):

- **transient** — a restart can help: a broker, a network or the sink's system is away for a
  while. Kafka marks these itself (`org.apache.kafka.common.errors.RetriableException` and its
  subclasses: TimeoutException, NetworkException, DisconnectException, NotLeaderOrFollower...,
  `org.apache.kafka.connect.errors.RetriableException`); the JDK's network errors
  (ConnectException, SocketTimeoutException, NoRouteToHostException...); JDBC's
  SQLTransientException and SQLRecoverableException families; a file or folder that is missing
  (NoSuchFileException: a volume not mounted yet, a share not there yet).
- **poison_record** — one record cannot be processed, and a restart only fails on it again
  (skip territory, never a restart loop): Connect's DataException (converters, transformations,
  schemas), Kafka's SerializationException and RecordTooLargeException / InvalidRecordException,
  Jackson's and Avro's parse errors, JDBC's SQLDataException and integrity violations; and
  Connect's "Tolerance exceeded in error handler", which it throws for a record that failed at a
  stage with `errors.tolerance=none` (when no known class in the trace says otherwise).
- **configuration** — a person must act (credentials, ACLs, a missing plugin, a bad setting):
  ConfigException, every Authentication/AuthorizationException of Kafka, JDBC's
  SQLInvalidAuthorizationSpecException and SQLSyntaxErrorException, ClassNotFoundException,
  AccessDeniedException, UnsupportedVersionException. Never restarted.
- **unknown** — nothing above: notify, never restart blindly.

When a trace holds several known classes: a configuration class anywhere decides (an
authentication failure surfacing as a timeout is still a person's problem); otherwise the
deepest known cause decides, since the wrappers only say where it surfaced. A DataException
from a converter whose root cause is a refused connection to the schema registry is transient,
not a poison record: skipping records because a registry is down would lose data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal, get_args

from offsetd.events.models import ErrorInfo

__all__ = [
    "CATALOG",
    "FAILURE_CLASSES",
    "Failure",
    "FailureClass",
    "classify",
    "exception_chain",
]

FailureClass = Literal["transient", "poison_record", "configuration", "unknown"]
FAILURE_CLASSES: tuple[FailureClass, ...] = get_args(FailureClass)

_TOLERANCE_EXCEEDED = "Tolerance exceeded in error handler"

# Exception class (exact name, or a glob) -> its failure class. Globs are tried after exact
# names, in this order.
CATALOG: dict[str, FailureClass] = {
    # -- configuration / permission: a person must act
    "org.apache.kafka.common.config.ConfigException": "configuration",
    "org.apache.kafka.common.errors.InvalidConfigurationException": "configuration",
    "org.apache.kafka.common.errors.UnsupportedVersionException": "configuration",
    "org.apache.kafka.common.errors.InvalidTopicException": "configuration",
    "org.apache.kafka.common.errors.*AuthenticationException": "configuration",
    "org.apache.kafka.common.errors.*AuthorizationException": "configuration",
    "org.apache.kafka.connect.errors.NotFoundException": "configuration",
    "javax.security.auth.login.LoginException": "configuration",
    "javax.net.ssl.SSLHandshakeException": "configuration",
    "java.sql.SQLInvalidAuthorizationSpecException": "configuration",
    "java.sql.SQLSyntaxErrorException": "configuration",
    "java.sql.SQLFeatureNotSupportedException": "configuration",
    "java.lang.ClassNotFoundException": "configuration",
    "java.lang.NoClassDefFoundError": "configuration",
    "java.nio.file.AccessDeniedException": "configuration",
    "java.nio.file.NotDirectoryException": "configuration",
    # -- poison record: this record fails wherever and whenever it is processed
    "org.apache.kafka.connect.errors.DataException": "poison_record",
    "org.apache.kafka.connect.errors.SchemaBuilderException": "poison_record",
    "org.apache.kafka.connect.errors.SchemaProjectorException": "poison_record",
    "org.apache.kafka.common.errors.SerializationException": "poison_record",
    "org.apache.kafka.common.errors.RecordTooLargeException": "poison_record",
    "org.apache.kafka.common.errors.InvalidRecordException": "poison_record",
    "org.apache.kafka.common.InvalidRecordException": "poison_record",
    "com.fasterxml.jackson.core.JsonParseException": "poison_record",
    "com.fasterxml.jackson.core.exc.StreamReadException": "poison_record",
    "com.fasterxml.jackson.databind.exc.*": "poison_record",
    "org.apache.avro.AvroRuntimeException": "poison_record",
    "org.apache.avro.AvroTypeException": "poison_record",
    "org.apache.avro.SchemaParseException": "poison_record",
    "java.sql.SQLDataException": "poison_record",
    "java.sql.SQLIntegrityConstraintViolationException": "poison_record",
    # -- transient: a restart can help once the other side is back
    "org.apache.kafka.connect.errors.RetriableException": "transient",
    "org.apache.kafka.common.errors.RetriableException": "transient",
    "org.apache.kafka.common.errors.TimeoutException": "transient",
    "org.apache.kafka.common.errors.NetworkException": "transient",
    "org.apache.kafka.common.errors.DisconnectException": "transient",
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException": "transient",
    "org.apache.kafka.common.errors.LeaderNotAvailableException": "transient",
    "org.apache.kafka.common.errors.NotEnoughReplicas*Exception": "transient",
    "org.apache.kafka.common.errors.Coordinator*Exception": "transient",
    "org.apache.kafka.common.errors.NotCoordinatorException": "transient",
    "org.apache.kafka.common.errors.UnknownTopicOrPartitionException": "transient",
    "org.apache.kafka.common.errors.KafkaStorageException": "transient",
    "org.apache.kafka.common.errors.RebalanceInProgressException": "transient",
    "org.apache.kafka.common.errors.ThrottlingQuotaExceededException": "transient",
    "java.net.ConnectException": "transient",
    "java.net.SocketException": "transient",
    "java.net.SocketTimeoutException": "transient",
    "java.net.NoRouteToHostException": "transient",
    "java.net.UnknownHostException": "transient",
    "java.net.http.HttpTimeoutException": "transient",
    "java.net.http.HttpConnectTimeoutException": "transient",
    "java.util.concurrent.TimeoutException": "transient",
    "java.nio.file.NoSuchFileException": "transient",
    "java.sql.SQLTransient*Exception": "transient",
    "java.sql.SQLRecoverableException": "transient",
    "java.sql.SQLTimeoutException": "transient",
    "org.apache.http.conn.ConnectTimeoutException": "transient",
    "org.apache.http.NoHttpResponseException": "transient",
}

_EXACT = {name: cls for name, cls in CATALOG.items() if "*" not in name}
_GLOBS = tuple((name, cls) for name, cls in CATALOG.items() if "*" in name)
_CLASS_LINE = re.compile(r"^(?:Caused by: )?([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::|$)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Failure:
    """A failure's class and the evidence: the exception class that decided it (or the
    message), so `rules explain` and the audit can say why."""

    failure: FailureClass
    because: str


def exception_chain(error: ErrorInfo) -> tuple[str, ...]:
    """The outer exception and every `Caused by:` of the trace head, outermost first; the
    root cause last even where the head was cut before it."""
    found = [m.group(1) for m in _CLASS_LINE.finditer(error.trace_head)]
    chain = [c for c in (error.exception_class, *found, error.root_cause_class) if c]
    return tuple(dict.fromkeys(chain))  # in order, once each


def _class_of(name: str) -> FailureClass | None:
    exact = _EXACT.get(name)
    if exact is not None:
        return exact
    for pattern, cls in _GLOBS:
        if fnmatchcase(name, pattern):
            return cls
    return None


_MEMO: dict[tuple[str | None, str | None, str], Failure] = {}
_MEMO_LIMIT = 256


def classify(error: ErrorInfo | None) -> Failure:
    """The failure class of `error` (unknown without one). Memoized: one failure repeats."""
    if error is None:
        return Failure("unknown", "no error")
    key = (error.exception_class, error.message, error.trace_head or (error.root_cause_class or ""))
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    result = _classify(error)
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = result
    return result


def _classify(error: ErrorInfo) -> Failure:
    known = [(name, cls) for name in exception_chain(error) if (cls := _class_of(name))]
    for name, cls in known:
        if cls == "configuration":
            return Failure(cls, name)
    if known:  # the deepest known cause decides: the wrappers only say where it surfaced
        name, cls = known[-1]
        return Failure(cls, name)
    texts = (error.message or "", error.trace_head)
    if any(_TOLERANCE_EXCEEDED in text for text in texts):
        return Failure("poison_record", _TOLERANCE_EXCEEDED)
    return Failure("unknown", "no known exception class in the trace")
