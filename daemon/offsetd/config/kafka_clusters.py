"""`kafka_clusters`: one Kafka cluster per alias, and the librdkafka properties it means.

`KafkaCluster.client_config()` is the one place that turns the security settings into client
properties (confluent-kafka's configuration dictionary); every Kafka client offsetd opens takes
its configuration from there. Secret-looking `client_properties` are redacted when rendered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import quote

from pydantic import AfterValidator, BeforeValidator, Field, field_serializer, model_validator

from offsetd.config.fields import (
    REDACTED,
    BootstrapServers,
    ClientProperties,
    ConfigModel,
    NonEmptyStr,
    Secret,
    is_secret_property,
    paired,
    upper,
)
from offsetd.yamlerrors import LocatedError

__all__ = [
    "KafkaCluster",
    "KafkaOAuth",
    "KafkaSasl",
    "KafkaTls",
    "SaslMechanism",
    "SecurityProtocol",
]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


class KafkaTls(ConfigModel):
    """TLS material for SSL and SASL_SSL. Without it, the system CA store is used."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: Secret | None = None
    check_hostname: bool = True

    @model_validator(mode="after")
    def _check_pairs(self) -> Self:
        problems = paired(("cert_file", self.cert_file), ("key_file", self.key_file))
        if self.key_password is not None and self.key_file is None:
            problems.append((("key_password",), "only used together with key_file"))
        if problems:
            raise LocatedError(problems)
        return self


def _http_url(value: str) -> str:
    if not value.startswith(("https://", "http://")) or value[-3:] == "://":
        raise ValueError("must be an http:// or https:// URL")
    return value


class KafkaOAuth(ConfigModel):
    """OAUTHBEARER through an OAuth 2 provider's client-credentials grant (OIDC): offsetd
    fetches a token from `token_endpoint_url` as `client_id` and sends it to the brokers, which
    check it against the provider's keys. `audience`: the token's audience the brokers expect,
    for a provider that grants one only on request (Ory Hydra)."""

    token_endpoint_url: Annotated[str, AfterValidator(_http_url)]
    client_id: NonEmptyStr
    client_secret: Secret
    scope: NonEmptyStr | None = None
    audience: NonEmptyStr | None = None
    ca_file: Path | None = None  # the token endpoint's CA (HTTPS); the system's CAs without it


class KafkaSasl(ConfigModel):
    """SASL login: a user and password (PLAIN, SCRAM), or an `oauth` client (OAUTHBEARER)."""

    mechanism: Annotated[SaslMechanism, BeforeValidator(upper)]
    username: NonEmptyStr | None = None
    password: Secret | None = None
    oauth: KafkaOAuth | None = None

    @model_validator(mode="after")
    def _check_login(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.mechanism == "OAUTHBEARER":
            if self.oauth is None:
                problems.append((("oauth",), "required when mechanism is OAUTHBEARER"))
            problems.extend(
                ((name,), "not used with OAUTHBEARER (the oauth client logs in)")
                for name in ("username", "password")
                if getattr(self, name) is not None
            )
        else:
            problems.extend(
                ((name,), f"required when mechanism is {self.mechanism}")
                for name in ("username", "password")
                if getattr(self, name) is None
            )
            if self.oauth is not None:
                problems.append((("oauth",), "only used with mechanism OAUTHBEARER"))
        if problems:
            raise LocatedError(problems)
        return self


# Properties client_config() derives from dedicated fields; client_properties may not set them.
_MANAGED_PROPERTIES = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "ssl.key.password",
        "ssl.endpoint.identification.algorithm",
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
    }
)  # not the sasl.oauthbearer.* ones: a config that set them as client_properties stays valid


class KafkaCluster(ConfigModel):
    """One Kafka cluster, known by its alias (the key in `kafka_clusters`)."""

    bootstrap_servers: BootstrapServers
    security_protocol: Annotated[SecurityProtocol, BeforeValidator(upper)] = "PLAINTEXT"
    tls: KafkaTls | None = None
    sasl: KafkaSasl | None = None
    # Extra librdkafka properties; values of secret-looking keys are redacted when rendered.
    client_properties: ClientProperties = Field(default_factory=dict)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in {"SSL", "SASL_SSL"}

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @model_validator(mode="after")
    def _check_security(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        protocol = self.security_protocol
        if self.uses_sasl and self.sasl is None:
            problems.append((("sasl",), f"required when security_protocol is {protocol}"))
        if not self.uses_sasl and self.sasl is not None:
            problems.append(
                (("sasl",), f"only used with SASL_PLAINTEXT or SASL_SSL, not {protocol}")
            )
        if not self.uses_tls and self.tls is not None:
            problems.append((("tls",), f"only used with SSL or SASL_SSL, not {protocol}"))
        problems.extend(
            (("client_properties", key), f"set this through the dedicated field, not {key!r}")
            for key in self.client_properties
            if key in _MANAGED_PROPERTIES
        )
        if problems:
            raise LocatedError(problems)
        return self

    @field_serializer("client_properties", when_used="json")
    def _redact_properties(self, value: dict[str, str]) -> dict[str, str]:
        return _redacted_properties(value)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name == "client_properties":
                yield name, _redacted_properties(value)
            else:
                yield name, value

    def client_config(self) -> dict[str, str]:
        """librdkafka (confluent-kafka) properties, secrets revealed: for clients, never output."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.uses_tls:
            tls = self.tls or KafkaTls()
            files = {
                "ssl.ca.location": tls.ca_file,
                "ssl.certificate.location": tls.cert_file,
                "ssl.key.location": tls.key_file,
            }
            config.update({key: str(path) for key, path in files.items() if path is not None})
            if tls.key_password is not None:
                config["ssl.key.password"] = tls.key_password.get_secret_value()
            config["ssl.endpoint.identification.algorithm"] = (
                "https" if tls.check_hostname else "none"
            )
        if self.sasl is not None:
            config["sasl.mechanism"] = self.sasl.mechanism
            config.update(_sasl_login(self.sasl))
        config.update(self.client_properties)
        return config


def _sasl_login(sasl: KafkaSasl) -> dict[str, str]:
    """librdkafka's login properties: user and password, or its OIDC client-credentials fetch
    (`sasl.oauthbearer.method=oidc`: librdkafka fetches and refreshes the token itself)."""
    if sasl.oauth is None:
        assert sasl.username is not None
        assert sasl.password is not None
        return {"sasl.username": sasl.username, "sasl.password": sasl.password.get_secret_value()}
    oauth = sasl.oauth
    config = {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": oauth.client_id,
        "sasl.oauthbearer.client.secret": oauth.client_secret.get_secret_value(),
        "sasl.oauthbearer.token.endpoint.url": oauth.token_endpoint_url,
    }
    # librdkafka appends its scope to the token request's form as it is ("...&scope=<scope>"),
    # and has no audience setting: the scope is form-encoded here, and the audience follows as
    # a form field of its own (the token provider of aiokafka's clients sends the same form)
    scope = quote(oauth.scope or "", safe="")
    if oauth.audience is not None:
        scope += "&audience=" + quote(oauth.audience, safe="")
    if scope:
        config["sasl.oauthbearer.scope"] = scope
    if oauth.ca_file is not None:
        config["https.ca.location"] = str(oauth.ca_file)
    return config


def _redacted_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if is_secret_property(k) else v for k, v in properties.items()}
