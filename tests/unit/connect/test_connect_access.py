"""Connect's 401/403 and failed TLS handshakes: not retriable, naming URL and user, never the
password. The 403 is tested here only: the secure stack's BasicAuthSecurityRestExtension has
no roles, so a real Connect never answers 403 to an authenticated user there."""

from __future__ import annotations

import ssl

import httpx

from offsetd.connect.client import error_for_status
from offsetd.connect.transport import tls_reason, transport_error
from offsetd.errors import ConnectAccessDenied, ConnectUnavailable, TlsFailed, is_retriable

URL = "https://connect:8083"


def test_401_names_url_and_user_and_is_not_retried() -> None:
    error = error_for_status(401, "Unauthorized", "list connectors", None, URL, user="offsetd")
    assert isinstance(error, ConnectAccessDenied)
    assert error.exit_code == 61
    assert not is_retriable(error)
    assert str(error) == (
        "could not list connectors: Connect at https://connect:8083 refused our credentials "
        "(user offsetd): 401"
    )


def test_403_says_what_the_user_may_not_do() -> None:
    error = error_for_status(403, "Forbidden", "alter offsets", "sink", URL, user="reader")
    assert isinstance(error, ConnectAccessDenied)
    assert not error.retriable
    assert str(error) == (
        "Connect at https://connect:8083: user reader is not allowed to alter offsets for sink "
        "(403)"
    )


def test_401_without_credentials_says_so() -> None:
    error = error_for_status(401, "Unauthorized", "reach Connect", None, URL)
    assert "no credentials configured" in str(error)


def _wrapped(cause: BaseException) -> httpx.ConnectError:
    """httpx's error as it arrives: ConnectError <- httpcore's <- the ssl error."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        return outer


def _verify_error(message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] {message}")
    error.verify_message = message
    error.reason = "CERTIFICATE_VERIFY_FAILED"
    return error


def test_a_certificate_that_does_not_verify_is_tls_failed_with_python_s_reason() -> None:
    for reason in (
        "unable to get local issuer certificate",
        "certificate has expired",
        "Hostname mismatch, certificate is not valid for '127.0.0.1'.",
    ):
        error = transport_error(_wrapped(_verify_error(reason)), "reach Connect", URL)
        assert isinstance(error, TlsFailed)
        assert error.exit_code == 60
        assert str(error) == (
            f"could not reach Connect: TLS handshake with Connect at {URL} failed: "
            f"certificate verify failed: {reason}"
        )


def test_no_answer_without_tls_cause_stays_retriable_unavailable() -> None:
    error = transport_error(_wrapped(ConnectionRefusedError(111, "refused")), "reach Connect", URL)
    assert type(error) is ConnectUnavailable
    assert error.retriable
    assert tls_reason(httpx.ReadTimeout("slow")) is None
