"""The `oauth` block of a Kafka cluster: validated with file and line, rendered for librdkafka and
aiokafka as one client, refused for Spark, and a refused token fetch or a token endpoint whose
certificate does not verify against `oauth.ca_file` in one line."""

from __future__ import annotations

import asyncio
import json
import ssl
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from offsetd.config import load_settings
from offsetd.errors import ConfigError, KafkaAuthFailed, TlsFailed
from offsetd.kafkaaccess import principal
from offsetd.kafkalogin import login_failure
from offsetd.oauthtoken import ClientCredentialsTokens, tokens_of
from offsetd.spark.errors import SparkJobFailed
from offsetd.spark.scan import kafka_options

SECRET = "Oa9-client-secret-unit"
CONFIG = """\
kafka_clusters:
  west:
    bootstrap_servers: 127.0.0.1:9094
    security_protocol: SASL_SSL
    sasl:
      mechanism: oauthbearer
      oauth:
        token_endpoint_url: http://127.0.0.1:4444/oauth2/token
        client_id: offsetd-client
        client_secret: {secret}
        scope: kafka admin
        audience: kafka
        ca_file: /etc/idp/ca.pem
connect_clusters: {{}}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsetd.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_librdkafka_and_aiokafka_get_the_same_client(tmp_path: Path) -> None:
    settings = load_settings(_write(tmp_path, CONFIG.format(secret=SECRET)))
    conf = settings.kafka_clusters["west"].client_config()
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    assert conf["sasl.oauthbearer.method"] == "oidc"
    assert conf["sasl.oauthbearer.client.id"] == "offsetd-client"
    assert conf["sasl.oauthbearer.client.secret"] == SECRET
    assert conf["sasl.oauthbearer.token.endpoint.url"] == "http://127.0.0.1:4444/oauth2/token"
    # librdkafka appends its scope to the form as it is: encoded here, the audience after it
    assert conf["sasl.oauthbearer.scope"] == "kafka%20admin&audience=kafka"
    assert conf["https.ca.location"] == "/etc/idp/ca.pem"
    assert "sasl.username" not in conf
    tokens = tokens_of(conf)
    assert tokens.form == {"scope": "kafka admin", "audience": "kafka"}
    assert (tokens.client_id, tokens.ca_file) == ("offsetd-client", "/etc/idp/ca.pem")
    assert SECRET not in repr(tokens)
    assert SECRET not in json.dumps(settings.redacted())
    assert (
        principal(conf)
        == "User:offsetd-client (OAuth client offsetd-client, if its tokens' sub is its id)"
    )


def test_the_client_secret_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OFFSETD_KAFKA_CLUSTERS__WEST__SASL__OAUTH__CLIENT_SECRET", "from-env")
    text = CONFIG.format(secret="x").replace("        client_secret: x\n", "")
    settings = load_settings(_write(tmp_path, text))
    assert settings.kafka_clusters["west"].client_config()["sasl.oauthbearer.client.secret"] == (
        "from-env"
    )


@pytest.mark.parametrize(
    ("change", "where", "message"),
    [
        (("      oauth:\n", "      username: offsetd\n      oauth:\n"), 6, "username: not used"),
        (("mechanism: oauthbearer", "mechanism: SCRAM-SHA-512"), 6, "oauth: only used with"),
        (("http://127.0.0.1:4444/oauth2/token", "ftp://x"), 9, "must be an http:// or https://"),
        (("        client_id: offsetd-client\n", ""), 8, "client_id: required"),
    ],
)
def test_a_bad_oauth_block_names_file_line_and_field(
    tmp_path: Path, change: tuple[str, str], where: int, message: str
) -> None:
    text = CONFIG.format(secret=SECRET).replace(*change)
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    text_of = str(info.value)
    assert f"{path}:" in text_of, text_of
    assert message in text_of, text_of
    assert any(f":{line}:" in text_of for line in range(where - 1, where + 2)), text_of
    assert SECRET not in text_of


def test_mechanism_oauthbearer_needs_the_oauth_block(tmp_path: Path) -> None:
    text = CONFIG.format(secret=SECRET)
    text = text[: text.index("      oauth:")] + "connect_clusters: {}\n"
    with pytest.raises(ConfigError, match=r"sasl\.oauth: required when mechanism is OAUTHBEARER"):
        load_settings(_write(tmp_path, text))


def test_spark_plans_refuse_oauthbearer_rather_than_log_the_secret(tmp_path: Path) -> None:
    settings = load_settings(_write(tmp_path, CONFIG.format(secret=SECRET)))
    with pytest.raises(SparkJobFailed, match="OAUTHBEARER is not supported") as info:
        kafka_options(settings.kafka_clusters["west"].client_config())
    assert SECRET not in str(info.value)


def test_a_refused_token_fetch_is_one_line_with_the_providers_words() -> None:
    conf = {
        "bootstrap.servers": "127.0.0.1:9094",
        "sasl.oauthbearer.client.id": "offsetd-client",
        "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.token.endpoint.url": "http://127.0.0.1:4444/oauth2/token",
    }
    # what librdkafka 2.16 reported against Hydra for a wrong client secret
    message = (
        'Failed to acquire SASL OAUTHBEARER token: {"error":"invalid_client","error_description":'
        '"Client authentication failed (e.g., unknown client, no client authentication '
        'included, or unsupported authentication method)."}'
    )
    found = login_failure("_AUTHENTICATION", message, conf, "Kafka cluster west (127.0.0.1:9094)")
    assert isinstance(found, KafkaAuthFailed)
    assert str(found) == (
        "the OAuth token endpoint http://127.0.0.1:4444/oauth2/token refused client "
        "offsetd-client (logging in to Kafka cluster west (127.0.0.1:9094)): invalid_client: "
        "Client authentication failed (e.g., unknown client, no client authentication "
        "included, or unsupported authentication method)."
    )
    refused = login_failure(
        "_AUTHENTICATION",
        'sasl_ssl://127.0.0.1:9094/bootstrap: SASL authentication error: {"status":'
        '"invalid_token"} (after 311ms in state AUTH_REQ)',
        conf,
        "Kafka cluster west (127.0.0.1:9094)",
    )
    assert str(refused) == (
        "Kafka cluster west (127.0.0.1:9094) refused the token of OAuth client offsetd-client: "
        '{"status":"invalid_token"}'
    )


TLS_CONF = {
    "bootstrap.servers": "127.0.0.1:9094",
    "sasl.oauthbearer.client.id": "offsetd-client",
    "sasl.oauthbearer.client.secret": SECRET,
    "sasl.oauthbearer.token.endpoint.url": "https://127.0.0.1:4444/oauth2/token",
    "https.ca.location": "/etc/idp/other-ca.pem",
}


@pytest.mark.parametrize(
    ("curl_says", "reason"),
    [
        (  # librdkafka 2.16 with oauth.ca_file another CA's (as on the stack)
            "SSL certificate OpenSSL verify result: unable to get local issuer certificate (20)",
            "SSL certificate OpenSSL verify result: unable to get local issuer certificate (20)",
        ),
        (  # librdkafka 2.16 with an https:// URL of a plain HTTP server
            "TLS connect error: error:0A00010B:SSL routines::wrong version number",
            "TLS connect error: wrong version number",
        ),
        (  # libcurl's words for a certificate of another host (its format string in 2.16)
            "SSL: no alternative certificate subject name matches target ipv4 address '127.0.0.2'",
            "SSL: no alternative certificate subject name matches target ipv4 address '127.0.0.2'",
        ),
    ],
)
def test_a_token_endpoint_whose_certificate_does_not_verify_is_one_tls_line(
    curl_says: str, reason: str
) -> None:
    """librdkafka's token fetch (libcurl) failed its TLS handshake: the endpoint, curl's reason
    and the CA file offsetd trusted, not "refused client"."""
    message = f"Failed to acquire SASL OAUTHBEARER token: {curl_says}"
    where = "Kafka cluster west (127.0.0.1:9094)"
    found = login_failure("_AUTHENTICATION", message, TLS_CONF, where)
    assert isinstance(found, TlsFailed)
    assert str(found) == (
        "TLS handshake with the OAuth token endpoint https://127.0.0.1:4444/oauth2/token failed "
        f"(logging in to {where}): {reason} (oauth.ca_file /etc/idp/other-ca.pem)"
    )
    assert SECRET not in str(found)
    without_ca = {k: v for k, v in TLS_CONF.items() if k != "https.ca.location"}
    found = login_failure("_AUTHENTICATION", message, without_ca, where)
    assert str(found).endswith("(the system's CA certificates)")


def test_the_token_providers_tls_failure_names_the_endpoint_and_the_ca_file() -> None:
    """aiokafka's provider: httpx's error wraps the ssl module's; Python's reason is kept."""
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "unable to get local issuer certificate"
    connect = httpx.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    connect.__context__ = verify
    tokens = ClientCredentialsTokens(
        TLS_CONF["sasl.oauthbearer.token.endpoint.url"],
        "offsetd-client",
        SECRET,
        ca_file=None,
    )

    def refuse(request: httpx.Request) -> httpx.Response:
        raise connect

    original = httpx.AsyncClient.__init__

    def with_transport(self: httpx.AsyncClient, **kwargs: Any) -> None:
        original(self, **kwargs, transport=httpx.MockTransport(refuse))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(httpx.AsyncClient, "__init__", with_transport)
        with pytest.raises(TlsFailed) as info:
            asyncio.run(tokens.token())
    assert str(info.value) == (
        "TLS handshake with the OAuth token endpoint https://127.0.0.1:4444/oauth2/token failed: "
        "certificate verify failed: unable to get local issuer certificate "
        "(the default CA certificates)"
    )
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__  # no traceback of httpx's chain


def test_an_unreadable_oauth_ca_file_is_one_line_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    tokens = ClientCredentialsTokens(
        "https://127.0.0.1:4444/oauth2/token", "offsetd-client", SECRET, ca_file=str(missing)
    )
    with pytest.raises(ConfigError) as info:
        asyncio.run(tokens.token())
    assert str(info.value) == (
        f"cannot load oauth.ca_file {missing} for the OAuth token endpoint "
        "https://127.0.0.1:4444/oauth2/token: No such file or directory"
    )
    not_pem = tmp_path / "not-a-ca.pem"
    not_pem.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"cannot load oauth.ca_file {not_pem} for the OAuth"):
        asyncio.run(
            ClientCredentialsTokens(
                "https://127.0.0.1:4444/oauth2/token", "c", SECRET, ca_file=str(not_pem)
            ).token()
        )
