"""offsetd.lag.groups: librdkafka's client settings in aiokafka's words."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from offsetd.lag.groups import aiokafka_options


def test_plaintext_is_the_bootstrap_servers_alone() -> None:
    assert aiokafka_options({"bootstrap.servers": "a:9092,b:9092"}) == {
        "bootstrap_servers": "a:9092,b:9092",
        "security_protocol": "PLAINTEXT",
    }


def test_sasl_ssl_with_scram_carries_the_mechanism_credentials_and_a_tls_context() -> None:
    options = aiokafka_options(
        {
            "bootstrap.servers": "a:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "offsetd",
            "sasl.password": "pw",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert options["security_protocol"] == "SASL_SSL"
    assert options["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (options["sasl_plain_username"], options["sasl_plain_password"]) == ("offsetd", "pw")
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.check_hostname is False
    assert context.verify_mode == ssl.CERT_REQUIRED  # the chain is still verified


def test_a_missing_ca_file_and_an_unsupported_mechanism_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        aiokafka_options(
            {
                "bootstrap.servers": "a:9093",
                "security.protocol": "SSL",
                "ssl.ca.location": str(tmp_path / "missing.pem"),
            }
        )
    with pytest.raises(ValueError, match="GSSAPI is not supported"):
        aiokafka_options(
            {
                "bootstrap.servers": "a:9093",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI",
            }
        )
