"""librdkafka's login and TLS error callbacks become one-line KafkaAuthFailed / TlsFailed.

The messages are the ones librdkafka 2.x gave against the secure local stack (a wrong SCRAM
password; a CA file of another CA), so a change in their shape shows here first.
"""

from __future__ import annotations

from offsetd.errors import KafkaAuthFailed, TlsFailed
from offsetd.kafkalogin import LoginWatch, describe, login_failure

CONF = {
    "bootstrap.servers": "127.0.0.1:9093",
    "sasl.username": "offsetd",
    "sasl.password": "s3cret-value",
    "ssl.ca.location": "/etc/offsetd/ca.pem",
}
WHERE = describe(CONF, "west")
AUTH = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed "
    "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 "
    "(after 171ms in state AUTH_REQ)"
)
SSL = (
    "sasl_ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::"
    "certificate verify failed: broker certificate could not be verified, verify that "
    "ssl.ca.location is correctly configured or root CA certificates are installed (install "
    "ca-certificates package) (after 18ms in state SSL_HANDSHAKE)"
)


def test_a_refused_login_names_cluster_user_and_cause_not_the_password() -> None:
    found = login_failure("_AUTHENTICATION", AUTH, CONF, WHERE)
    assert isinstance(found, KafkaAuthFailed)
    assert found.exit_code == 59
    assert str(found) == (
        "Kafka cluster west (127.0.0.1:9093) refused the login of user offsetd: Authentication "
        "failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )
    assert "s3cret-value" not in str(found)


def test_an_unverified_certificate_names_cluster_cause_and_the_ca_file() -> None:
    found = login_failure("_SSL", SSL, CONF, WHERE)
    assert isinstance(found, TlsFailed)
    assert found.exit_code == 60
    assert str(found) == (
        "TLS handshake with Kafka cluster west (127.0.0.1:9093) failed: certificate verify "
        "failed: broker certificate could not be verified (tls.ca_file /etc/offsetd/ca.pem)"
    )


def test_without_a_ca_file_the_system_store_is_named() -> None:
    conf = {k: v for k, v in CONF.items() if k != "ssl.ca.location"}
    found = login_failure("_SSL", SSL, conf, describe(conf))
    assert str(found).startswith("TLS handshake with Kafka at 127.0.0.1:9093 failed")
    assert str(found).endswith("(the system's CA certificates)")


def test_other_errors_are_not_login_failures() -> None:
    assert login_failure("_ALL_BROKERS_DOWN", "1/1 brokers are down", CONF, WHERE) is None
    assert login_failure("_TRANSPORT", "Connection refused", CONF, WHERE) is None


class _Err:
    def __init__(self, code: str, text: str) -> None:
        self._code, self._text = code, text

    def name(self) -> str:
        return self._code

    def str(self) -> str:
        return self._text


def test_the_watch_keeps_the_first_login_failure() -> None:
    watch = LoginWatch(CONF, WHERE)
    watch(_Err("_ALL_BROKERS_DOWN", "1/1 brokers are down"))  # type: ignore[arg-type]
    assert watch.failure is None
    watch(_Err("_SSL", SSL))  # type: ignore[arg-type]
    watch(_Err("_AUTHENTICATION", AUTH))  # type: ignore[arg-type]
    assert isinstance(watch.failure, TlsFailed)
