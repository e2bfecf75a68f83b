"""Tell a refused Kafka login or a failed TLS handshake from a cluster that does not answer.

librdkafka reports a wrong SASL password or a broker certificate it cannot verify only through
the client's `error_cb` (codes `_AUTHENTICATION` and `_SSL`), and only while the client is
polled; the request itself just times out as a "broker transport failure". So a command with a
wrong password would wait its whole timeout and then blame the network. `LoginWatch` collects
those callbacks, `login_failure` turns the first one into `KafkaAuthFailed` / `TlsFailed` with
one line naming the cluster and the cause (librdkafka's words carry no secret; with OAUTHBEARER
a token endpoint that refused the client or whose certificate did not verify is named instead),
and `check_login`
is the probe every command runs before it uses a cluster: it returns as soon as a broker answers
or librdkafka reported why it will not, and remembers a cluster that answered, so a command
that makes several clients pays for one probe.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import re
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from offsetd.config import Settings
from offsetd.errors import KafkaAuthFailed, OffsetdError, TlsFailed

__all__ = [
    "LoginWatch",
    "answering_admin",
    "check_login",
    "check_logins",
    "checked_config",
    "describe",
    "login_failure",
    "remember_answered",
    "wait_answered",
    "watched_admin",
]

_AUTH = "_AUTHENTICATION"
_TOKEN_FETCH = "Failed to acquire SASL OAUTHBEARER token: "  # noqa: S105 - a message
_SSL = "_SSL"
_TRANSPORT = "_TRANSPORT"
# A broker that refuses the client certificate (missing, or of a CA it does not trust) does so,
# over TLS 1.3, after the client's side of the handshake: librdkafka sees the alert on its first
# read and reports a transport failure ("Receive failed: ...: ssl/tls alert bad certificate").
_CERT_ALERT = re.compile(
    r"alert (bad certificate|certificate unknown|unknown ca|certificate required|"
    r"certificate expired|certificate revoked)",
    re.IGNORECASE,
)
_BROKER_PREFIX = re.compile(r"^\S+://\S+?/\S+?: ")  # "sasl_ssl://host:port/bootstrap: "
_OPENSSL_CODE = re.compile(r"error:[0-9A-Fa-f]+:[^:]*:[^:]*:")  # "error:0A000086:SSL routines::"
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")
# libcurl's words (librdkafka's HTTP client) for a token endpoint whose TLS handshake failed
# (librdkafka 2.16): "SSL certificate OpenSSL verify result: unable to get local issuer
# certificate (20)", "SSL: no alternative certificate subject name matches ...", "TLS connect
# error: error:0A00010B:SSL routines::wrong version number"
_CURL_TLS = re.compile(r"^(SSL|OpenSSL|TLS)\b|^error setting certificate|SSL routines|SSL_connect")

_CALLBACK_CHECK_S = 0.02  # how often a waiting probe looks for a login or TLS failure
_ANSWERED: set[str] = set()  # clusters (bootstrap, identity) that answered in this process
_ANSWERED_LOCK = threading.Lock()


def login_failure(
    code: str, message: str, conf: Mapping[str, str], where: str
) -> OffsetdError | None:
    """The error for one librdkafka error callback, or None when it is not about the login."""
    refused_cert = code in (_SSL, _TRANSPORT) and _CERT_ALERT.search(message) is not None
    if code not in (_AUTH, _SSL) and not refused_cert:
        return None
    reason = _AFTER.sub("", _BROKER_PREFIX.sub("", message.strip()))
    if refused_cert:
        reason = _OPENSSL_CODE.sub("", reason.removeprefix("Receive failed: "))
        reason = reason.removeprefix("SSL handshake failed: ")
        cert = conf.get("ssl.certificate.location")
        if cert is None:
            return TlsFailed(
                f"{where} requires a client certificate, and none is configured "
                f"(tls.cert_file, tls.key_file): {reason}"
            )
        return TlsFailed(
            f"{where} refused the client certificate {cert} (tls.cert_file; is it signed by a "
            f"CA the brokers trust?): {reason}"
        )
    if code == _AUTH:
        reason = reason.removeprefix("SASL authentication error: ")
        client = conf.get("sasl.oauthbearer.client.id")
        if client is not None:
            return _oauth_failure(reason, client, conf, where)
        user = conf.get("sasl.username", "?")
        return KafkaAuthFailed(f"{where} refused the login of user {user}: {reason}")
    reason = _OPENSSL_CODE.sub("", reason.removeprefix("SSL handshake failed: "))
    reason = reason.split(", verify that ssl.ca.location")[0]
    ca = conf.get("ssl.ca.location")
    trusted = f" (tls.ca_file {ca})" if ca else " (the system's CA certificates)"
    return TlsFailed(f"TLS handshake with {where} failed: {reason}{trusted}")


def _oauth_failure(
    reason: str, client: str, conf: Mapping[str, str], where: str
) -> KafkaAuthFailed | TlsFailed:
    """OAUTHBEARER: the token endpoint refused the client (librdkafka could not fetch a
    token: the provider's RFC 6749 error in its words), its certificate did not verify against
    `oauth.ca_file` (librdkafka's `https.ca.location`), or the broker refused the token."""
    if not reason.startswith(_TOKEN_FETCH):
        return KafkaAuthFailed(f"{where} refused the token of OAuth client {client}: {reason}")
    detail = reason.removeprefix(_TOKEN_FETCH)
    url = conf.get("sasl.oauthbearer.token.endpoint.url", "?")
    if _CURL_TLS.search(detail):
        ca = conf.get("https.ca.location")
        trusted = f"oauth.ca_file {ca}" if ca else "the system's CA certificates"
        return TlsFailed(
            f"TLS handshake with the OAuth token endpoint {url} failed (logging in to {where}): "
            f"{_OPENSSL_CODE.sub('', detail)[:300]} ({trusted})"
        )
    with contextlib.suppress(ValueError, AttributeError):
        body = json.loads(detail)
        detail = f"{body['error']}: {body.get('error_description', '')}".rstrip(": ")
    return KafkaAuthFailed(
        f"the OAuth token endpoint {url} refused client {client} (logging in to {where}): "
        f"{detail[:300]}"
    )


def describe(conf: Mapping[str, str], alias: str | None = None) -> str:
    """'Kafka cluster west (host:port)', or 'Kafka at host:port' when the alias is unknown."""
    bootstrap = conf.get("bootstrap.servers", "?")
    return f"Kafka cluster {alias} ({bootstrap})" if alias else f"Kafka at {bootstrap}"


class LoginWatch:
    """An `error_cb` that keeps the first login or TLS failure librdkafka reported."""

    def __init__(self, conf: Mapping[str, str], where: str) -> None:
        self._conf = dict(conf)
        self._where = where
        self._lock = threading.Lock()
        self.failure: OffsetdError | None = None

    def __call__(self, error: KafkaError) -> None:
        found = login_failure(error.name(), error.str(), self._conf, self._where)
        with self._lock:
            if found is not None and self.failure is None:
                self.failure = found

    def raised(self) -> OffsetdError:
        """A copy of the failure, to raise. Raising the kept one itself made a cycle: the
        client holds this watch (its error callback), the watch the error, the error's
        traceback the frame holding the client. The client then lived to the interpreter's
        finalization and was destroyed there while its threads ran: a segfault after the right
        message (CI, a refused login; 2 in 60 runs under load)."""
        assert self.failure is not None
        return copy.copy(self.failure)


def watched_admin(
    conf: Mapping[str, str], where: str | None = None
) -> tuple[AdminClient, LoginWatch]:
    """An AdminClient whose login and TLS failures land in the returned watch."""
    watch = LoginWatch(conf, where or describe(conf))
    # librdkafka's own FAIL lines would repeat the reason on stderr: the watch reports it once
    settings: dict[str, Any] = {**conf, "error_cb": watch, "log_level": 0}
    return AdminClient(settings), watch


def wait_answered(admin: AdminClient, watch: LoginWatch, timeout_s: float) -> bool:
    """Wait for a broker to answer a DescribeCluster; raise the watch's failure as soon as
    librdkafka reports one (callbacks are only served while the client is polled). False when
    nothing answered in time and no login failure was reported: the caller's own request then
    says what went wrong."""
    deadline = time.monotonic() + timeout_s
    future = admin.describe_cluster(request_timeout=timeout_s)
    while True:
        admin.poll(0)  # serve the error callbacks that arrived
        if watch.failure is not None:
            raise watch.raised()
        # Wait on the future, not in poll(): its answer does not wake a poll, which slept its
        # whole timeout (a 50 ms poll cost every new client 50 ms, four of them per `offsetd lag`).
        done, _pending = wait([future], timeout=_CALLBACK_CHECK_S)
        if done:
            try:
                future.result(timeout=0)
                return True
            except (KafkaException, TimeoutError):
                admin.poll(0.05)  # a failure reported with the timeout
                if watch.failure is not None:
                    raise watch.raised() from None
                return False
        if time.monotonic() >= deadline:
            return False


def answering_admin(conf: Mapping[str, str], where: str | None, timeout_s: float) -> AdminClient:
    """A watched AdminClient, once a broker answered (remembered for this process) or
    `timeout_s` passed. A refused login or certificate is raised, the client dropped first:
    raised with its traceback, the frames holding it kept it alive to the interpreter's exit,
    where OpenSSL's cleanup ran under its still running threads (a segfault after the right
    message: 2 in 60 refused logins under load)."""
    admin, watch = watched_admin(conf, where)
    refused: OffsetdError | None = None
    try:
        answered = wait_answered(admin, watch, timeout_s)
    except OffsetdError as failure:
        refused = failure
    if refused is not None:
        refused.__traceback__ = None
        del admin
        raise refused
    if answered:
        remember_answered(conf)
    return admin


def check_login(conf: Mapping[str, str], alias: str | None = None, timeout_s: float = 10.0) -> None:
    """Raise KafkaAuthFailed / TlsFailed if the cluster refuses this login or certificate.

    A cluster that does not answer at all is not reported here (the command's own request
    does, in its words). A cluster that answered once in this process is not asked again.
    """
    key = _identity(conf)
    with _ANSWERED_LOCK:
        if key in _ANSWERED:
            return
    answering_admin(conf, describe(conf, alias), timeout_s)


def checked_config(settings: Settings, alias: str, timeout_s: float = 10.0) -> dict[str, str]:
    """The client config of a configured cluster, once `check_login` let it pass: what a
    command calls before it makes its own clients, so a wrong password fails in one line."""
    conf = settings.kafka_clusters[alias].client_config()
    check_login(conf, alias, timeout_s)
    return conf


def check_logins(settings: Settings, timeout_s: float = 10.0) -> None:
    """`check_login` for every configured cluster at once (a command that reads them all, like
    `offsetd lag`, which would otherwise turn a refused login into a warning per stage)."""
    with ThreadPoolExecutor(max_workers=max(1, len(settings.kafka_clusters))) as pool:
        futures = [
            pool.submit(check_login, cluster.client_config(), alias, timeout_s)
            for alias, cluster in sorted(settings.kafka_clusters.items())
        ]
    for future in futures:
        future.result()  # the first refusal, in alias order


def remember_answered(conf: Mapping[str, str]) -> None:
    """Note that a broker accepted this login (kept as a digest, never the password itself)."""
    with _ANSWERED_LOCK:
        _ANSWERED.add(_identity(conf))


def _identity(conf: Mapping[str, str]) -> str:
    digest = hashlib.sha256()
    for key in sorted(conf):
        digest.update(f"{key}\0{conf[key]}\0".encode())
    return digest.hexdigest()
