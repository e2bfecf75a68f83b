"""OAuth 2 client-credentials tokens for aiokafka's OAUTHBEARER login (faust's and lag's clients).

librdkafka fetches and refreshes its own token (`sasl.oauthbearer.method=oidc`); aiokafka asks
a token provider instead, at every connection's SASL handshake. `ClientCredentialsTokens` takes
the same settings as librdkafka (the client config `KafkaCluster.client_config()` renders), so
every client of a cluster logs in as the same OAuth client. It keeps a token until a fifth of
its lifetime is left (librdkafka refreshes at 80 % too) and fetches one for a handshake after
that. A refused fetch raises `KafkaAuthFailed` with the endpoint's own error code and words
(never the secret, never a token). The endpoint's certificate is checked against `oauth.ca_file`
alone when it is set (librdkafka's `https.ca.location`; the system's CAs otherwise); one that
does not verify raises `TlsFailed` naming the endpoint, Python's reason and the CA file.

A broker ends an OAUTHBEARER session when its token expires (KIP-368; sooner with
`connections.max.reauth.ms`) and closes the connection at its next request unless the client
logged in again on it. librdkafka does; aiokafka (0.14) cannot, so the broker dropped the
daemon's connections every token lifetime, failing the requests in flight, and faust's producer
stalled within minutes (its buffer full, progress events timing out: seen on the local stack
with 30 s tokens). `install_session_renewal` therefore retires an aiokafka connection when its
token is due for renewal: the client's connection pool sees it as gone, opens a new one (whose
handshake gets a fresh token) and the old one closes once its requests in flight had time to
finish. No request is sent on an expired session.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, quote

import httpx
from aiokafka.abc import AbstractTokenProvider  # type: ignore[import-untyped]
from aiokafka.conn import AIOKafkaConnection, CloseReason  # type: ignore[import-untyped]

from offsetd.errors import ConfigError, KafkaAuthFailed, TlsFailed

__all__ = ["ClientCredentialsTokens", "install_session_renewal", "tokens_of"]

_REFRESH_AT = 0.8  # of a token's lifetime
_MIN_LIFETIME_S = 5.0
_TIMEOUT_S = 10.0
_DRAIN_S = 5.0  # a retired connection's requests in flight finish within this (fetch waits 0.5 s)
_installed = False


class ClientCredentialsTokens(AbstractTokenProvider):  # type: ignore[misc]  # untyped base
    """Tokens of one OAuth client, fetched with the client-credentials grant and cached."""

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str,
        *,
        form: Mapping[str, str] | None = None,
        ca_file: str | None = None,
    ) -> None:
        self.token_url = token_url
        self.client_id = client_id
        self._secret = client_secret
        self.form = dict(form or {})  # scope, audience
        self.ca_file = ca_file
        self._token: str | None = None
        self._refresh_at = 0.0
        self._state = threading.Lock()
        self.fetched = 0  # tokens fetched so far (the tests' and operators' view of refreshes)

    def __repr__(self) -> str:  # no secret, no token
        return f"<ClientCredentialsTokens client_id={self.client_id} url={self.token_url}>"

    @property
    def renew_at(self) -> float:
        """When (time.monotonic) the current token is due for renewal: the end of the sessions
        it opened, as far as offsetd's connections are concerned."""
        return self._refresh_at

    async def token(self) -> str:
        """The cached token while it has more than a fifth of its lifetime left, else a new one.

        One provider serves clients on several event loops (faust runs its consumer on a thread
        of its own), so the cache is guarded by a thread lock, never held across the fetch: two
        handshakes at the same moment may each fetch a token, which is harmless."""
        with self._state:
            if self._token is not None and time.monotonic() < self._refresh_at:
                return self._token
        token, lifetime = await self._fetch()
        with self._state:
            self._token = token
            self._refresh_at = time.monotonic() + max(lifetime, _MIN_LIFETIME_S) * _REFRESH_AT
            self.fetched += 1
        return token

    async def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials", **self.form}
        # RFC 6749 2.3.1: id and secret are form-encoded before they go into basic auth
        auth = (quote(self.client_id, safe=""), quote(self._secret, safe=""))
        where = f"the OAuth token endpoint {self.token_url}"
        verify = self._verify()
        try:
            async with httpx.AsyncClient(verify=verify, timeout=_TIMEOUT_S) as client:
                response = await client.post(self.token_url, data=form, auth=auth)
        except httpx.HTTPError as exc:
            reason = _tls_reason(exc)
            if reason is not None:
                raise TlsFailed(
                    f"TLS handshake with {where} failed: {reason} ({self._trusted()})"
                ) from None
            raise KafkaAuthFailed(f"{where} did not answer: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise KafkaAuthFailed(
                f"{where} refused OAuth client {self.client_id}: "
                f"HTTP {response.status_code} {_oauth_error(response)}"
            )
        try:
            body = response.json()
            token = str(body["access_token"])
            lifetime = float(body.get("expires_in", 60))
        except (ValueError, KeyError, TypeError):
            raise KafkaAuthFailed(f"{where} answered without an access_token") from None
        return token, lifetime

    def _verify(self) -> ssl.SSLContext | bool:
        """The CA file alone when one is set (read at each fetch: a rotated file is seen)."""
        if self.ca_file is None:
            return True
        try:
            return ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"cannot load oauth.ca_file {self.ca_file} for the OAuth token endpoint "
                f"{self.token_url}: {exc.strerror or exc}"
            ) from None

    def _trusted(self) -> str:
        return f"oauth.ca_file {self.ca_file}" if self.ca_file else "the default CA certificates"


def _tls_reason(exc: BaseException) -> str | None:
    """Python's ssl reason for a failed handshake somewhere in `exc`'s causes, else None
    (httpx wraps httpcore's error, which wraps the `ssl.SSLError`)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {current.verify_message or current.reason}"
        if isinstance(current, ssl.SSLError):
            return str(current.reason or current).strip()
        current = current.__cause__ or current.__context__
    return None


def _oauth_error(response: httpx.Response) -> str:
    """RFC 6749's `error` and `error_description`, cut short; the status alone otherwise."""
    try:
        body = response.json()
        return f"{body.get('error', '')}: {body.get('error_description', '')}"[:300]
    except ValueError:
        return response.reason_phrase


def install_session_renewal() -> None:
    """Make aiokafka retire a connection whose OAUTHBEARER token is due for renewal (see the
    module's docstring); once per process, idempotent. Connections logged in otherwise are
    left alone."""
    global _installed  # noqa: PLW0603 - one patch per process
    if _installed:
        return
    _installed = True
    connected, handshake = AIOKafkaConnection.connected, AIOKafkaConnection._do_sasl_handshake

    async def _do_sasl_handshake(conn: Any) -> None:
        await handshake(conn)
        provider = conn._sasl_oauth_token_provider
        if conn._sasl_mechanism == "OAUTHBEARER" and isinstance(provider, ClientCredentialsTokens):
            conn._offsetd_renew_at = provider.renew_at

    def _connected(conn: Any) -> bool:
        if not connected(conn):
            return False
        renew_at = getattr(conn, "_offsetd_renew_at", None)
        if renew_at is None or time.monotonic() < renew_at:
            return True
        conn._offsetd_renew_at = None  # retired once: the pool drops it now
        if conn._requests:
            conn._loop.call_later(_DRAIN_S, conn.close, CloseReason.IDLE_DROP)
        else:
            conn.close(CloseReason.IDLE_DROP)
        return False

    AIOKafkaConnection._do_sasl_handshake = _do_sasl_handshake
    AIOKafkaConnection.connected = _connected


def tokens_of(conf: Mapping[str, str]) -> ClientCredentialsTokens:
    """The provider for a librdkafka client config whose `sasl.oauthbearer.method` is oidc
    (and aiokafka's session renewal installed: every aiokafka client gets its provider here)."""
    install_session_renewal()
    # the form fields librdkafka sends: its scope setting is "<scope>[&audience=<audience>]",
    # form-encoded (KafkaCluster.client_config)
    extra = parse_qsl("scope=" + conf.get("sasl.oauthbearer.scope", ""), keep_blank_values=False)
    return ClientCredentialsTokens(
        conf["sasl.oauthbearer.token.endpoint.url"],
        conf["sasl.oauthbearer.client.id"],
        conf["sasl.oauthbearer.client.secret"],
        form=dict(extra),
        ca_file=conf.get("https.ca.location"),
    )
