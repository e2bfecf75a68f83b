"""The httpx client arguments for a Connect cluster's REST API: base URL, basic auth, TLS.

Next to the clients that use them (`offsetd.connect.client`, the lag collector's status reads,
the remediation's webhooks and Connect calls). The SSL context is built once per cluster and
certificate files, because httpx otherwise builds (and loads CA certificates into) a new one for
each client.

`transport_error` says why a request got no answer: a failed TLS handshake (unknown CA,
expired certificate, wrong host, in Python's ssl words) is `TlsFailed`, which asking again cannot
fix; anything else is a retriable `ConnectUnavailable`. A server that refuses offsetd's client
certificate does so, over TLS 1.3, only after the handshake: its alert arrives on the first read
as a bare `ssl.SSLError` that httpcore does not wrap. `_AlertTransport` wraps it as the
transport error it is, so every client of these options reports it as `TlsFailed`.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import certifi
import httpx

from offsetd.config import ConnectCluster, ConnectTls
from offsetd.errors import ConfigError, ConnectUnavailable, OffsetdError, TlsFailed

__all__ = ["httpx_options", "tls_reason", "transport_error", "user_of"]


def user_of(cluster: ConnectCluster) -> str | None:
    """The basic-auth user of a cluster (never its password), for messages."""
    return cluster.auth.username if cluster.auth is not None else None


# TLS alerts a server sends about the client's certificate (OpenSSL's reason names)
_CLIENT_CERT_ALERTS = ("ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_UNKNOWN",
                       "ALERT_UNKNOWN_CA", "ALERT_CERTIFICATE_REQUIRED",
                       "ALERT_CERTIFICATE_EXPIRED", "ALERT_CERTIFICATE_REVOKED")  # fmt: skip


def transport_error(exc: BaseException, what: str, url: str) -> OffsetdError:
    """The error for a request that got no answer (an httpx transport error)."""
    reason = tls_reason(exc)
    if reason is not None and any(alert in reason.upper() for alert in _CLIENT_CERT_ALERTS):
        return TlsFailed(
            f"could not {what}: Connect at {url} refused the client certificate "
            f"(tls.cert_file; missing or not signed by a CA it trusts): {reason}"
        )
    if reason is not None:
        return TlsFailed(f"could not {what}: TLS handshake with Connect at {url} failed: {reason}")
    return ConnectUnavailable(
        f"could not {what}: Connect at {url} did not answer ({type(exc).__name__})"
    )


def tls_reason(exc: BaseException) -> str | None:
    """Python's ssl reason for a failed handshake somewhere in `exc`'s causes, else None.

    httpx wraps httpcore's error, which wraps the `ssl.SSLError`; a certificate that does not
    verify says why ("unable to get local issuer certificate", "certificate has expired",
    "Hostname mismatch, certificate is not valid for 'x'").
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            detail = current.verify_message or current.reason or "unknown reason"
            return f"certificate verify failed: {detail}"
        if isinstance(current, ssl.SSLError):
            return str(current.reason or current).strip()
        current = current.__cause__ or current.__context__
    return None


class _AlertTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, with a TLS alert read after the handshake as an httpx.ReadError."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await super().handle_async_request(request)
        except ssl.SSLError as exc:
            raise httpx.ReadError(str(exc.reason or exc), request=request) from exc


def httpx_options(cluster: ConnectCluster) -> dict[str, Any]:
    """Keyword arguments for `httpx.AsyncClient` (reads the TLS files)."""
    auth = None
    if cluster.auth is not None:
        auth = httpx.BasicAuth(cluster.auth.username, cluster.auth.password.get_secret_value())
    verify = _verify(cluster)
    options: dict[str, Any] = {"base_url": cluster.url, "auth": auth, "verify": verify}
    if isinstance(verify, ssl.SSLContext):
        options["transport"] = _AlertTransport(verify=verify)
    return options


def _verify(cluster: ConnectCluster) -> ssl.SSLContext | bool:
    """An SSL context shared by every client of this cluster.

    httpx builds (and loads CA certificates into) a new context for each client otherwise:
    30-80 ms per client, several clients per remediation. The files' modification times
    are part of the cache key, so rotated certificates are read again.
    """
    tls = cluster.tls
    if cluster.url.lower().startswith("http://"):
        return False  # no TLS on this connection: no CA bundle to load (30-50 ms)
    if tls is not None and tls.ca_file is None and tls.cert_file is None and not tls.verify:
        return False
    key = (cluster.url, *(_file_stamp(f) for f in _tls_files(tls)), tls.verify if tls else True)
    context = _SSL_CONTEXTS.get(key)
    if context is None:
        context = _new_ssl_context(cluster)
        _SSL_CONTEXTS[key] = context
    return context


def _new_ssl_context(cluster: ConnectCluster) -> ssl.SSLContext:
    tls = cluster.tls
    if tls is None or (tls.ca_file is None and tls.cert_file is None):
        return ssl.create_default_context(cafile=certifi.where())
    where = f"Connect cluster at {cluster.url}"
    try:
        cafile = str(tls.ca_file) if tls.verify and tls.ca_file is not None else None
        context = ssl.create_default_context(cafile=cafile)
    except OSError as exc:
        raise ConfigError(f"cannot load tls.ca_file for {where}: {exc}") from None
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert_file is not None and tls.key_file is not None:
        try:
            # An empty password makes an encrypted key fail instead of prompting on the tty.
            context.load_cert_chain(tls.cert_file, tls.key_file, password="")
        except OSError as exc:
            raise ConfigError(
                f"cannot load tls.cert_file/key_file for {where}: {exc} "
                "(the key must be PEM and not encrypted)"
            ) from None
    return context


_SSL_CONTEXTS: dict[tuple[object, ...], ssl.SSLContext] = {}


def _tls_files(tls: ConnectTls | None) -> tuple[Path | None, ...]:
    return (None, None, None) if tls is None else (tls.ca_file, tls.cert_file, tls.key_file)


def _file_stamp(path: Path | None) -> tuple[str, int] | None:
    if path is None:
        return None
    try:
        return str(path), path.stat().st_mtime_ns
    except OSError:
        return str(path), -1  # the context's own load names the problem
