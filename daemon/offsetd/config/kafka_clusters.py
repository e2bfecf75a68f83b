"""`kafka_clusters`: one Kafka cluster per alias, and the librdkafka properties it means.

`KafkaCluster.client_config()` is the one place that turns the security settings into client
properties (confluent-kafka's configuration dictionary); every Kafka client offsetd opens takes
its configuration from there. Secret-looking `client_properties` are redacted when rendered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import BeforeValidator, Field, field_serializer, model_validator

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

__all__ = ["KafkaCluster", "KafkaSasl", "KafkaTls", "SaslMechanism", "SecurityProtocol"]

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


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


class KafkaSasl(ConfigModel):
    mechanism: Annotated[SaslMechanism, BeforeValidator(upper)]
    username: NonEmptyStr
    password: Secret


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
)


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
            config["sasl.username"] = self.sasl.username
            config["sasl.password"] = self.sasl.password.get_secret_value()
        config.update(self.client_properties)
        return config


def _redacted_properties(properties: Mapping[str, str]) -> dict[str, str]:
    return {k: REDACTED if is_secret_property(k) else v for k, v in properties.items()}
