"""Exceptions that offsetd raises on purpose.

Every error meant for an operator derives from `OffsetdError`, so the CLI can catch one
type, print its message (never a traceback) and exit with its `exit_code`. Each situation a
script may want to tell apart has its own code::

    OffsetdError                exit 1   base: anything offsetd reports to the operator
    ├── RulesError              exit 1   a rule file is invalid (offsetd.rules.loading)
    ├── ConfigError             exit 2   the configuration file or environment is invalid
    ├── DevStackError           exit 3   the local stack (offsetd.devstack.errors)
    ├── ConnectorNotFound       exit 4   Connect answered 404 for the connector
    ├── ConnectBusy             exit 5   409 (rebalance) or lingering sink tasks, after retries
    ├── NotStoppedInTime        exit 6   the connector did not reach STOPPED with no tasks
    ├── ConnectorRejected       exit 7   the connector's own alterOffsets refused (Connect 500)
    ├── ConnectTooOld           exit 8   the worker predates the offsets REST API (< 3.6)
    ├── InvalidDocument         exit 9   an offsets document or ConfigMap is invalid
    ├── ConnectorStateRefused   exit 10  the connector is FAILED/UNASSIGNED: nothing was touched
    ├── StrimziManaged          exit 11  the cluster is run by Strimzi: change offsets via its CRs
    ├── ConnectUnavailable      exit 12  Connect could not be reached or refused us
    ├── ChangeIncomplete        exit 13  a change failed past the stop step (state is reported)
    ├── OfflineError            exit 1   an offline read or write failed (offsetd.offsets, offline)
    │   ├── OfflineRefused      exit 14  offline writes while workers run
    │   └── OfflineWriteIncomplete exit 13  some records of an offline write may be written: the
    │                                    code of ChangeIncomplete, for the same situation
    ├── UndoConflict            exit 15  offsets moved since the change being undone
    ├── TargetOutOfRange        exit 17  a target lies outside a partition's log
    ├── SnapshotStoreError      exit 18  the snapshot store is unusable (offsetd.offsets.snapshots)
    │   ├── SnapshotNotFound    exit 16  no snapshot with that id
    │   └── SnapshotCorrupt     exit 18  a stored snapshot cannot be read back intact
    ├── AuditError              exit 19  a decision was not acknowledged by the audit topic
    ├── ClusterMismatch         exit 20  a Connect cluster's Kafka is not the bootstrap's (run)
    ├── InternalTopicsError     exit 21  offsetd's own topics cannot be made or seen (run)
    ├── ControlStoreUnavailable exit 23  the control topic (pause, approvals, breakers) is unusable
    ├── ControlRefused          exit 24  a control command refused (unknown decision id, ...)
    ├── InvalidPredicate        exit 25  a rewind predicate does not parse or is not allowed
    ├── SkipRunRefused          exit 26  skip-run matches are not one run from the committed offset
    ├── NothingToRewind         exit 27  no partition of the scan matched: no plan written
    ├── SparkJobFailed          exit 28  Spark, its jars or the scan failed
    ├── QuarantineFailed        exit 40  the quarantine copy was not acknowledged
    ├── ConfigNotRestored       exit 41  locating could not restore the connector's config
    ├── RecordUnavailable       exit 42  the record to check or copy is no longer in the log
    ├── SagaStoreError          exit 43  the sagas topic is unusable
    ├── Superseded              exit 44  a newer owner epoch took the saga over: this one stops
    ├── SkipAborted             exit 45  a skip saga stopped before writing (nothing changed)
    ├── StatusUnreadable        exit 46  the status topic could not be read: a guard fails closed
    ├── StartNotPinned          exit 47  a sink that committed nothing: its start cannot be pinned
    ├── RewindRefused           exit 55  a rewind action's target or plan does not fit the connector
    ├── KubernetesError         exit 56  the Kubernetes API refused a call or could not be reached
    ├── GitOpsManaged           exit 57  the resource belongs to a GitOps controller (Argo CD, Flux)
    ├── KafkaAccessDenied       exit 58  an ACL is missing: names the operation and the topic/group
    ├── KafkaAuthFailed         exit 59  SASL authentication failed (user, password, mechanism)
    ├── TlsFailed               exit 60  a TLS handshake failed (unknown CA, expired, wrong host)
    ├── IncidentNotFound        exit 62  no incident with that id (or unique prefix) in the audit
    ├── FailoverError           exit 63  a consumer-group failover/failback refused or not read back
    └── ConnectUnavailable      exit 12  (see above)
        └── ConnectAccessDenied exit 61  Connect answered 401 (credentials) or 403 (not allowed)

Messages must be safe to print and log: they never carry secret values.

An error also says whether asking again can help (`retriable`: Connect did not answer, was
busy, or failed on its side) and, when it came from an HTTP answer, its `status`; retries
(`offsetd.retry`) read those marks, never the message.
"""

from __future__ import annotations

import copy
from typing import Self

__all__ = [
    "ChangeIncomplete",
    "ConfigError",
    "ConnectAccessDenied",
    "ConnectBusy",
    "ConnectTooOld",
    "ConnectUnavailable",
    "ConnectorNotFound",
    "ConnectorRejected",
    "ConnectorStateRefused",
    "ControlRefused",
    "ControlStoreUnavailable",
    "FailoverError",
    "GitOpsManaged",
    "IncidentNotFound",
    "InvalidDocument",
    "KafkaAccessDenied",
    "KafkaAuthFailed",
    "KubernetesError",
    "NotStoppedInTime",
    "OffsetdError",
    "StrimziManaged",
    "TargetOutOfRange",
    "TlsFailed",
    "UndoConflict",
    "is_retriable",
]


class OffsetdError(Exception):
    """Base class for errors reported to the operator as a message and an exit code."""

    exit_code: int = 1
    retriable: bool = False  # the class's default; an instance may say otherwise

    def __init__(
        self, message: str = "", *, status: int | None = None, retriable: bool | None = None
    ) -> None:
        super().__init__(message)
        self.status = status  # the HTTP status of the answer this error reports, if any
        if retriable is not None:
            self.retriable = retriable

    def reworded(self, message: str) -> Self:
        """The same error with another message: its class, status and retriable mark kept."""
        again = copy.copy(self)
        again.args = (message,)
        return again


def is_retriable(exc: BaseException) -> bool:
    """Worth asking again (an idempotent call): the error's own mark."""
    return isinstance(exc, OffsetdError) and exc.retriable


class ConfigError(OffsetdError):
    """The configuration (file or environment) cannot be read or is invalid.

    Exit code 2 matches click's usage errors: the command was given bad input.
    """

    exit_code = 2


class ConnectorNotFound(OffsetdError):
    exit_code = 4


class ConnectBusy(OffsetdError):
    exit_code = 5
    retriable = True


class NotStoppedInTime(OffsetdError):
    exit_code = 6


class ConnectorRejected(OffsetdError):
    exit_code = 7


class ConnectTooOld(OffsetdError):
    exit_code = 8


class InvalidDocument(OffsetdError):
    exit_code = 9


class ConnectorStateRefused(OffsetdError):
    exit_code = 10


class StrimziManaged(OffsetdError):
    exit_code = 11


class KubernetesError(OffsetdError):
    """A Kubernetes API call failed; a 403 names the verb and resource the Role lacks."""

    exit_code = 56


class GitOpsManaged(OffsetdError):
    """A GitOps controller would revert `spec.state` too: refused unless the config allows it."""

    exit_code = 57


class ConnectUnavailable(OffsetdError):
    exit_code = 12
    retriable = True


class ConnectAccessDenied(ConnectUnavailable):
    """Connect refused our credentials (401) or the request (403): asking again cannot help."""

    exit_code = 61
    retriable = False


class KafkaAccessDenied(OffsetdError):
    """The principal lacks an ACL: the message names the operation, the resource and where."""

    exit_code = 58


class KafkaAuthFailed(OffsetdError):
    """SASL authentication failed: wrong user, password or mechanism (never the password)."""

    exit_code = 59


class IncidentNotFound(OffsetdError):
    """`offsetd history --incident`: no incident, or several, with that id or prefix."""

    exit_code = 62


class FailoverError(OffsetdError):
    """`offsetd mm2 failover/failback` (and a group's undo): refused with nothing changed, or a
    commit that did not read back; one line saying which group and why."""

    exit_code = 63


class TlsFailed(OffsetdError):
    """A TLS handshake failed: the peer's certificate is unknown, expired or for another host."""

    exit_code = 60


class ChangeIncomplete(OffsetdError):
    exit_code = 13


class UndoConflict(OffsetdError):
    exit_code = 15


class TargetOutOfRange(OffsetdError):
    exit_code = 17


class ControlStoreUnavailable(OffsetdError):
    """The guard state (the control topic) could not be read or a write was not acknowledged."""

    exit_code = 23


class ControlRefused(OffsetdError):
    """An operator command on the guard state does not apply (unknown id, already decided...)."""

    exit_code = 24
