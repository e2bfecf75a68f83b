"""The offsetd configuration: pydantic models, loaded from `offsetd.yaml` plus environment.

Precedence (highest first): environment variables, the YAML file, model defaults. Environment
variables are `OFFSETD_` + the field path joined by `__`, matched case-insensitively, e.g.
`OFFSETD_KAFKA_CLUSTERS__WEST__SASL__PASSWORD`; they deep-merge into the file's values, so one
variable changes one field. List and mapping fields take JSON
(`OFFSETD_CONNECT_CLUSTERS__LOCAL__DLQ_TOPICS='["dlq-a"]'`).

Error messages name where the bad value came from (`offsetd.yaml:14: <field.path>: ...` or
`environment OFFSETD_...: <field.path>: ...`). They quote values only of plain fields (topic
names, aliases, servers) and never input values in general, which may be secrets.
"""

from __future__ import annotations

import contextlib
import os
import re
import ssl
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

import certifi
import httpx
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_serializer,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
)
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from offsetd.errors import ConfigError
from offsetd.rules.models import Duration
from offsetd.yamlerrors import YamlFileError, dotted, plain, read_yaml

__all__ = [
    "CONFIG_PATH_ENV_VAR",
    "DEFAULT_CONFIG_PATH",
    "ENV_NESTED_DELIMITER",
    "ENV_PREFIX",
    "REDACTED",
    "ConnectAuth",
    "ConnectCluster",
    "ConnectTls",
    "ConnectorScope",
    "KafkaCluster",
    "KafkaSasl",
    "KafkaTls",
    "LagSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "Settings",
    "is_secret_property",
    "load_settings",
]

DEFAULT_CONFIG_PATH = Path("offsetd.yaml")
CONFIG_PATH_ENV_VAR = "OFFSETD_CONFIG"
ENV_PREFIX = "OFFSETD_"
ENV_NESTED_DELIMITER = "__"
REDACTED = "**********"  # what SecretStr shows; used for secret client properties too

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

_SECRET_PROPERTY_WORDS = ("password", "secret", "token", "key")
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_ALIAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def is_secret_property(name: str) -> bool:
    """Whether a client property's value must be redacted (its key looks like a secret)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_PROPERTY_WORDS)


# -- field types --------------------------------------------------------------------------------


class _LocatedError(ValueError):
    """Validation problems at field paths below the model that raised them.

    A model validator can only fail as a whole; this carries the exact sub-paths so error
    messages (and YAML line numbers) point at the offending field rather than its parent.
    """

    def __init__(self, problems: list[tuple[tuple[str | int, ...], str]]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{dotted(loc)}: {msg}" for loc, msg in problems))


def _check_topic(name: str) -> str:
    if not _TOPIC_RE.fullmatch(name) or name in {".", ".."}:
        raise ValueError(
            f"invalid Kafka topic name {name!r}: use 1-249 characters from [a-zA-Z0-9._-]"
        )
    return name


def _check_alias(alias: str) -> str:
    # Aliases name clusters in logs, metrics and env variable names: keep them plain.
    if not _ALIAS_RE.fullmatch(alias):
        raise ValueError(
            f"invalid alias {alias!r}: use up to 100 letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return alias


def _check_bootstrap(value: str) -> str:
    entries = [entry.strip() for entry in value.split(",")]
    if not any(entries):
        raise ValueError("must list at least one host:port")
    for entry in entries:
        host, sep, port = entry.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")  # [::1]:9092
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{entry!r} is not host:port (comma-separate several servers)")
    return ",".join(entries)


def _check_url(value: str) -> str:
    # Messages never echo the URL: it could embed credentials.
    value = value.strip()
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname or not port_ok:
        raise ValueError("must be an http:// or https:// URL with a host and optional port")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not contain credentials; use auth.username and auth.password")
    if parts.query or parts.fragment:
        raise ValueError("must not have a query string or fragment")
    return value


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _scalar_to_str(value: Any) -> Any:
    # librdkafka takes strings; let YAML authors write `linger.ms: 5` or `enable.idempotence: true`.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _none_to_empty(factory: Callable[[], object]) -> BeforeValidator:
    # `dlq_topics:` with every entry commented out is YAML null; treat it as empty.
    return BeforeValidator(lambda value: factory() if value is None else value)


TopicName = Annotated[str, AfterValidator(_check_topic)]
Alias = Annotated[str, AfterValidator(_check_alias)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
BootstrapServers = Annotated[str, AfterValidator(_check_bootstrap)]
HttpUrl = Annotated[str, AfterValidator(_check_url)]
ClientProperties = Annotated[
    dict[NonEmptyStr, Annotated[str, BeforeValidator(_scalar_to_str)]], _none_to_empty(dict)
]


class _Model(BaseModel):
    """Base of every config section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def _paired(
    first: tuple[str, object | None], second: tuple[str, object | None]
) -> list[tuple[tuple[str | int, ...], str]]:
    (name_a, a), (name_b, b) = first, second
    if (a is None) == (b is None):
        return []
    missing = name_b if b is None else name_a
    return [((missing,), f"required when {name_a if b is None else name_b} is set")]


# -- Kafka --------------------------------------------------------------------------------------


class KafkaTls(_Model):
    """TLS material for SSL and SASL_SSL. Without it, the system CA store is used."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: SecretStr | None = None
    check_hostname: bool = True

    @model_validator(mode="after")
    def _check_pairs(self) -> Self:
        problems = _paired(("cert_file", self.cert_file), ("key_file", self.key_file))
        if self.key_password is not None and self.key_file is None:
            problems.append((("key_password",), "only used together with key_file"))
        if problems:
            raise _LocatedError(problems)
        return self


class KafkaSasl(_Model):
    mechanism: Annotated[SaslMechanism, BeforeValidator(_upper)]
    username: NonEmptyStr
    password: SecretStr


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


class KafkaCluster(_Model):
    """One Kafka cluster, known by its alias (the key in `kafka_clusters`)."""

    bootstrap_servers: BootstrapServers
    security_protocol: Annotated[SecurityProtocol, BeforeValidator(_upper)] = "PLAINTEXT"
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
            raise _LocatedError(problems)
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


# -- Kafka Connect ------------------------------------------------------------------------------


class ConnectAuth(_Model):
    """HTTP basic auth for the Connect REST API."""

    username: NonEmptyStr
    password: SecretStr


class ConnectTls(_Model):
    """TLS for an https Connect REST API; `verify: false` skips server verification."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    verify: bool = True

    @model_validator(mode="after")
    def _check_pairs(self) -> Self:
        problems = _paired(("cert_file", self.cert_file), ("key_file", self.key_file))
        if problems:
            raise _LocatedError(problems)
        return self


_LABEL_RE = re.compile(r"([A-Za-z0-9][A-Za-z0-9._/-]{0,252})=(.+)")


def _check_label(entry: str) -> str:
    if not _LABEL_RE.fullmatch(entry):
        raise ValueError(
            f"{entry!r} is not key=value (a connector carries the label as its config entry "
            "offsetd.label.<key>=<value>; keys: letters, digits, '.', '_', '/', '-')"
        )
    return entry


class ConnectorScope(_Model):
    """The connectors a deployment owns (offsetd.scope): names or globs, or `key=value` labels
    (connector config entries `offsetd.label.<key>=<value>`); any match admits. Empty: all."""

    connectors: Annotated[list[NonEmptyStr], _none_to_empty(list)] = Field(default_factory=list)
    labels: Annotated[list[Annotated[str, AfterValidator(_check_label)]], _none_to_empty(list)] = (
        Field(default_factory=list)
    )


class ConnectCluster(_Model):
    """One Kafka Connect cluster: its REST API and the Kafka cluster holding its internal topics."""

    url: HttpUrl
    auth: ConnectAuth | None = None
    tls: ConnectTls | None = None
    kafka_cluster: NonEmptyStr
    group_id: NonEmptyStr = "connect-cluster"
    offsets_topic: TopicName = "connect-offsets"
    configs_topic: TopicName = "connect-configs"
    status_topic: TopicName = "connect-status"
    dlq_topics: Annotated[list[TopicName], _none_to_empty(list)] = Field(default_factory=list)
    orchestrator: Literal["none", "strimzi"] = "none"
    # The connectors offsetd acts on here (offsetd.scope); None: remediation.scope applies.
    scope: ConnectorScope | None = None

    @model_validator(mode="after")
    def _check_consistency(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        if self.tls is not None and not self.url.lower().startswith("https:"):
            problems.append((("tls",), "only used with an https:// url"))
        seen: dict[str, str] = {}
        for field in ("offsets_topic", "configs_topic", "status_topic"):
            topic = getattr(self, field)
            if topic in seen:
                problems.append(((field,), f"must differ from {seen[topic]} ({topic!r})"))
            seen.setdefault(topic, field)
        if problems:
            raise _LocatedError(problems)
        return self

    def httpx_options(self) -> dict[str, Any]:
        """Keyword arguments for `httpx.Client` / `httpx.AsyncClient` (reads the TLS files)."""
        auth = None
        if self.auth is not None:
            auth = httpx.BasicAuth(self.auth.username, self.auth.password.get_secret_value())
        return {"base_url": self.url, "auth": auth, "verify": self._verify()}

    def _verify(self) -> ssl.SSLContext | bool:
        """An SSL context shared by every client of this cluster.

        httpx builds (and loads CA certificates into) a new context for each client otherwise:
        30-80 ms per client, several clients per remediation. The files' modification times
        are part of the cache key, so rotated certificates are read again.
        """
        tls = self.tls
        if tls is not None and tls.ca_file is None and tls.cert_file is None and not tls.verify:
            return False
        key = (self.url, *(_file_stamp(f) for f in _tls_files(tls)), tls.verify if tls else True)
        context = _SSL_CONTEXTS.get(key)
        if context is None:
            context = self._new_ssl_context()
            _SSL_CONTEXTS[key] = context
        return context

    def _new_ssl_context(self) -> ssl.SSLContext:
        tls = self.tls
        if tls is None or (tls.ca_file is None and tls.cert_file is None):
            return ssl.create_default_context(cafile=certifi.where())
        where = f"Connect cluster at {self.url}"
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


class OffsetsSettings(_Model):
    """Where the offsets toolkit keeps its snapshots (the before/after images behind undo)."""

    snapshots_topic: TopicName = "offsetd.snapshots"
    # Default: the Kafka cluster of the Connect cluster being changed.
    snapshots_kafka_cluster: Alias | None = None


class DaemonSettings(_Model):
    """`offsetd run`: which Kafka cluster this process reads, and how it spreads the work.

    One process consumes one Kafka cluster (faust's model): the status, offsets and DLQ topics of
    every Connect cluster whose internal topics live there.
    """

    kafka_cluster: Alias | None = None  # default: the only one holding Connect internal topics
    app_id: NonEmptyStr = "offsetd"
    partitions: Annotated[int, Field(ge=1, le=1024)] = 8  # the re-keyed topic and every Table
    rules_dir: Path = Path("rules/examples")
    audit_topic: TopicName = "offsetd.audit"
    web_host: NonEmptyStr = "127.0.0.1"
    web_port: Annotated[int, Field(ge=0, le=65535)] = 6066
    data_dir: Path = Path(".offsetd/state")
    replication_factor: Annotated[int, Field(ge=1, le=10)] | None = None
    # The workers' consumer group (faust's broker_session_timeout, broker_heartbeat_interval,
    # broker_rebalance_timeout). A worker that ends without leaving the group (SIGKILL, OOM
    # kill, a lost host) keeps its partitions until `group_session_timeout` passes without its
    # heartbeat: until then nothing is decided for its connectors, a restarted worker included.
    # A saga it left unfinished does not wait when it restarts in place (README: "After a
    # crash"). Shorter: faster takeover after a lost host, more rebalances on a slow network
    # or a busy event loop. Kafka brokers accept 6s to 30m by default.
    group_session_timeout: Annotated[Duration, Field(ge=6_000, le=1_800_000)] = 60_000
    group_heartbeat_interval: Annotated[Duration, Field(ge=100)] = 3_000
    group_rebalance_timeout: Annotated[Duration, Field(ge=1_000)] = 60_000

    @model_validator(mode="after")
    def _check_group_timings(self) -> Self:
        if self.group_heartbeat_interval * 3 > self.group_session_timeout:
            raise ValueError(
                "daemon.group_heartbeat_interval must be at most a third of "
                "daemon.group_session_timeout (a member is dropped after one session timeout "
                "without a heartbeat)"
            )
        return self


class BlastRadius(_Model):
    """An outage is not a poison record: above this many failing connectors, act on none.

    A connector counts when it is failing now or went FAILED within `within` (Connect's status
    topic). The count is taken no earlier than `settle` after the event that led to the
    decision: connectors failing together report FAILED a moment apart (a DLQ record even
    comes ~0.5 s before its own FAILED status).
    """

    max_failing_connectors: Annotated[int, Field(ge=1)] = 3
    within: Duration = 300_000
    settle: Duration = 5_000


class SkipBudget(_Model):
    """At most `max` skips per connector per `per`, across rules, stored durably."""

    max: Annotated[int, Field(ge=1)] = 5
    per: Duration = 3_600_000


class RemediationSettings(_Model):
    """How decisions act: the durable topics, the guardrails and the saga's timings.

    Durations are strings such as `30s`, `2m`, `1h`. All topics live on the daemon's Kafka cluster.
    """

    quarantine_topic: TopicName = "offsetd.quarantine"
    sagas_topic: TopicName = "offsetd.sagas"
    control_topic: TopicName = "offsetd.control"
    # Connector classes (globs) whose offsets offsetd may move past a record; `sink` means any
    # sink connector (Connect owns a sink's offsets in its consumer group).
    skip_allowlist: list[NonEmptyStr] = Field(
        default_factory=lambda: ["sink", "org.apache.kafka.connect.mirror.MirrorSourceConnector"]
    )
    opt_out: list[NonEmptyStr] = Field(
        default_factory=list, description="Connector name globs offsetd never acts on."
    )
    # The connectors this deployment owns on every Connect cluster without a scope of its own
    # (offsetd.scope); the rest are dropped before the rules. Empty: every connector.
    scope: Annotated[ConnectorScope, _none_to_empty(ConnectorScope)] = Field(
        default_factory=ConnectorScope
    )
    skip_budget: SkipBudget = Field(default_factory=SkipBudget)
    blast_radius: BlastRadius = Field(default_factory=BlastRadius)
    breaker_window: Duration = 600_000  # a new failure this soon after a skip opens the breaker
    verify_stable_for: Duration = 120_000
    stop_timeout: Duration = 60_000
    resume_timeout: Duration = 120_000
    locate_timeout: Duration = 120_000  # waiting for the failure to repeat in one-record batches
    webhook_timeout: Duration = 5_000
    max_retries: Annotated[int, Field(ge=0, le=20)] = 5  # Connect 409/500/no answer, per step


class LagSettings(_Model):
    """MirrorMaker 2 lag collection (`offsetd lag`, and the daemon's /metrics page).

    `enabled`: `offsetd run` collects lag in exactly one of its workers (the owner of partition
    0 of its internal events topic) and appends it to that worker's /metrics; false leaves lag to
    a separate `offsetd lag serve`. Durations are strings such as `10s`, `5m`. `window` is how
    far back the status rules look (Burrow style); `flush_interval` is Connect's
    `offset.flush.interval.ms`, which bounds how fresh N can be. The sample window is kept in
    `state_file` (default: in `daemon.data_dir`).
    """

    enabled: bool = True
    interval: Duration = 10_000
    window: Duration = 600_000
    flush_interval: Duration = 60_000
    aggregate_per_topic: bool = False  # one series per topic instead of per partition
    seconds_lag_concurrency: Annotated[int, Field(ge=1, le=1000)] = 256  # partitions at a time
    seconds_lag_max_fetches: Annotated[int, Field(ge=0)] = 2_000  # per cycle; the rest next cycle
    # Partitions per ListOffsets call; None: one call per source cluster and cycle (one request
    # per broker). librdkafka merges a call's answers in O(n^2), so an estate far above ~20k
    # partitions per source cluster may trade requests for CPU, e.g. 10000.
    list_offsets_batch: Annotated[int, Field(ge=100)] | None = None
    slo_seconds: Annotated[float, Field(gt=0)] = 300.0  # exported for the seconds-lag alert
    state_file: Path | None = None


class SparkSettings(_Model):
    """Spark for `offsetd rewind plan` (content-based targets; see offsetd.spark).

    `master` is where the scan runs (`local[2]` by default; `yarn`, `k8s://...`, `spark://...`
    on a cluster); `conf` is passed to the SparkSession as is, e.g. `spark.driver.memory` or, on
    a cluster, `spark.jars.packages: org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version>`.
    Spark logs its conf, so secret-looking keys are refused here: Kafka credentials come from
    `kafka_clusters` and go only into the Kafka source's options.
    """

    master: NonEmptyStr = "local[2]"
    conf: ClientProperties = Field(default_factory=dict)

    @model_validator(mode="after")
    def _no_secrets(self) -> Self:
        problems: list[tuple[tuple[str | int, ...], str]] = [
            (("conf", key), "looks like a secret: Spark logs its conf, keep secrets out of it")
            for key in self.conf
            if is_secret_property(key)
        ]
        if problems:
            raise _LocatedError(problems)
        return self


# -- the whole configuration --------------------------------------------------------------------


class Settings(BaseSettings):
    """The whole offsetd configuration. Build it with `load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
    )

    kafka_clusters: Annotated[dict[Alias, KafkaCluster], _none_to_empty(dict)] = Field(
        default_factory=dict
    )
    connect_clusters: Annotated[dict[Alias, ConnectCluster], _none_to_empty(dict)] = Field(
        default_factory=dict
    )
    offsets: Annotated[OffsetsSettings, _none_to_empty(OffsetsSettings)] = Field(
        default_factory=OffsetsSettings
    )
    daemon: Annotated[DaemonSettings, _none_to_empty(DaemonSettings)] = Field(
        default_factory=DaemonSettings
    )
    lag: Annotated[LagSettings, _none_to_empty(LagSettings)] = Field(default_factory=LagSettings)
    spark: Annotated[SparkSettings, _none_to_empty(SparkSettings)] = Field(
        default_factory=SparkSettings
    )
    remediation: Annotated[RemediationSettings, _none_to_empty(RemediationSettings)] = Field(
        default_factory=RemediationSettings
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        prepared = _PREPARED_INPUT.get()
        if prepared is not None:  # inside load_settings: file and environ already merged
            return (_PreparedSource(settings_cls, prepared),)
        # Otherwise explicit values over os.environ; no `.env` or secrets-dir lookups.
        return init_settings, env_settings

    @model_validator(mode="after")
    def _check_references(self) -> Self:
        known = ", ".join(sorted(self.kafka_clusters)) or "none configured"
        problems: list[tuple[tuple[str | int, ...], str]] = [
            (
                ("connect_clusters", name, "kafka_cluster"),
                f"unknown Kafka cluster alias {cluster.kafka_cluster!r} (known: {known})",
            )
            for name, cluster in self.connect_clusters.items()
            if cluster.kafka_cluster not in self.kafka_clusters
        ]
        daemon_cluster = self.daemon.kafka_cluster
        if daemon_cluster is not None and daemon_cluster not in self.kafka_clusters:
            problems.append(
                (
                    ("daemon", "kafka_cluster"),
                    f"unknown Kafka cluster alias {daemon_cluster!r} (known: {known})",
                )
            )
        snapshots = self.offsets.snapshots_kafka_cluster
        if snapshots is not None and snapshots not in self.kafka_clusters:
            problems.append(
                (
                    ("offsets", "snapshots_kafka_cluster"),
                    f"unknown Kafka cluster alias {snapshots!r} (known: {known})",
                )
            )
        if problems:
            raise _LocatedError(problems)
        return self

    def daemon_kafka_cluster(self) -> str:
        """The Kafka cluster `offsetd run` reads: configured, or the only one Connect uses."""
        if self.daemon.kafka_cluster is not None:
            return self.daemon.kafka_cluster
        used = sorted({c.kafka_cluster for c in self.connect_clusters.values()})
        if len(used) != 1:
            raise ConfigError(
                f"Connect clusters keep their topics on {len(used)} Kafka clusters "
                f"({', '.join(used) or 'none'}): set daemon.kafka_cluster (one process each)"
            )
        return used[0]

    def redacted(self) -> dict[str, Any]:
        """A JSON-able dump that is safe to print: every secret is replaced by `REDACTED`."""
        return self.model_dump(mode="json")


# -- loading ------------------------------------------------------------------------------------


# BaseSettings runs its sources in __init__, even under model_validate. load_settings merges
# file and environment itself (to locate errors), then hands the result over through this.
_PREPARED_INPUT: ContextVar[dict[str, Any] | None] = ContextVar("offsetd_prepared", default=None)


class _PreparedSource(PydanticBaseSettingsSource):
    """All values at once, as merged by load_settings (unknown keys included, to be rejected)."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class _EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source, reading a given mapping instead of os.environ."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ  # read by _load_env_vars, which the base __init__ calls
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        if self.case_sensitive:
            return dict(self._environ)
        return {name.lower(): value for name, value in self._environ.items()}


def load_settings(path: Path | None, environ: Mapping[str, str] | None = None) -> Settings:
    """Load `path` (YAML; `None` for none), apply `environ` (default `os.environ`), validate.

    Raises `ConfigError` naming the file and line, or the environment variable, of every
    problem found, one per line.
    """
    environ = os.environ if environ is None else environ
    tree = _read_yaml(path) if path is not None else None
    try:
        file_data = plain(tree, path) if tree is not None and path is not None else {}
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None

    try:
        env_data = _EnvironSource(Settings, environ)()
    except SettingsError as exc:
        raise ConfigError(_env_parse_message(str(exc), environ)) from None

    token = _PREPARED_INPUT.set(_deep_merge(file_data, env_data))
    try:
        return Settings()
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    finally:
        _PREPARED_INPUT.reset(token)
    # Raised outside the except block: the ValidationError (which prints input values,
    # possibly secrets) must not ride along as __context__ into tracebacks or logs.
    locator = _Locator(path, tree, _env_paths(environ))
    raise ConfigError("\n".join(_format_errors(errors, locator)))


def _read_yaml(path: Path) -> CommentedMap | None:
    if not path.exists():
        raise ConfigError(f"configuration file {path} does not exist")
    try:
        tree = read_yaml(path)
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    if tree is None:  # empty file: no clusters, which is valid
        return None
    if not isinstance(tree, CommentedMap):
        kind = "a list" if isinstance(tree, CommentedSeq) else "a single value"
        raise ConfigError(
            f"{path}: the top level must be a mapping of sections such as kafka_clusters, "
            f"not {kind}"
        )
    return tree


def _deep_merge(base: Any, override: Any) -> Any:
    """`override` wins; mappings merge key by key. Env keys arrive lower-cased, so an env key
    matches a differently-cased file key when that is the only case-insensitive match."""
    if not (isinstance(base, dict) and isinstance(override, dict)):
        return override
    merged = dict(base)
    for key, value in override.items():
        target = key
        if key not in merged and isinstance(key, str):
            matches = [k for k in merged if isinstance(k, str) and k.lower() == key.lower()]
            if len(matches) == 1:
                target = matches[0]
        merged[target] = _deep_merge(merged[target], value) if target in merged else value
    return merged


def _env_paths(environ: Mapping[str, str]) -> dict[tuple[str, ...], str]:
    """Lower-cased field path -> variable name, for every `OFFSETD_` variable."""
    prefix = ENV_PREFIX.lower()
    return {
        tuple(name[len(prefix) :].lower().split(ENV_NESTED_DELIMITER)): name
        for name in environ
        if name.lower().startswith(prefix)
    }


def _env_parse_message(detail: str, environ: Mapping[str, str]) -> str:
    # SettingsError names only the top-level field; list the variables that feed it.
    match = re.search(r'field "([^"]+)"', detail)
    field = match.group(1) if match else ""
    names = sorted(name for path, name in _env_paths(environ).items() if path[0] == field)
    where = ", ".join(names) if names else f"{ENV_PREFIX}*"
    return f"environment {where}: cannot parse the value; list and mapping fields take JSON"


class _Locator:
    """Says where the value at a field path came from: a file line or an env variable."""

    def __init__(
        self, path: Path | None, tree: CommentedMap | None, env: dict[tuple[str, ...], str]
    ) -> None:
        self.path = path
        self.tree = tree
        self.env = env

    def where(self, loc: tuple[str | int, ...]) -> str:
        lowered = tuple(str(part).lower() for part in loc)
        # The variable that set this value (or one of its ancestors)?
        for depth in range(len(lowered), 0, -1):
            name = self.env.get(lowered[:depth])
            if name is not None:
                return f"environment {name}"
        depth, line = self._deepest_in_file(loc)
        if depth < len(loc):
            # The path leaves the file here: do variables create what lies below?
            below = sorted(
                name for path, name in self.env.items() if path[: depth + 1] == lowered[: depth + 1]
            )
            if below:
                return "environment " + ", ".join(below)
        if self.path is None:
            return "environment"
        return f"{self.path}:{line}" if line else str(self.path)

    def _deepest_in_file(self, loc: tuple[str | int, ...]) -> tuple[int, int | None]:
        """How many leading parts of `loc` exist in the YAML, and the 1-based line of the last."""
        node: Any = self.tree
        if node is None:
            return 0, None
        line: int | None = node.lc.line + 1
        for depth, part in enumerate(loc):
            if isinstance(node, CommentedMap) and part in node:
                with contextlib.suppress(KeyError, TypeError):  # `<<:` merged keys: no position
                    line = node.lc.key(part)[0] + 1
                node = node[part]
            elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
                line = node.lc.item(part)[0] + 1
                node = node[part]
            else:
                return depth, line
        return len(loc), line


_MESSAGES = {
    "extra_forbidden": "unknown key",
    "missing": "required field is missing",
}


def _format_errors(errors: list[ErrorDetails], locator: _Locator) -> list[str]:
    lines: list[str] = []
    for error in errors:
        loc = tuple(part for part in error["loc"] if part != "[key]")
        cause = (error.get("ctx") or {}).get("error")
        if isinstance(cause, _LocatedError):
            problems = [((*loc, *sub), msg) for sub, msg in cause.problems]
        else:
            msg = _MESSAGES.get(error["type"], error["msg"])
            problems = [(loc, msg.removeprefix("Value error, "))]
        for full_loc, msg in problems:
            field = dotted(full_loc)
            lines.append(f"{locator.where(full_loc)}: {field + ': ' if field else ''}{msg}")
    return lines


_PLAIN_KEY_RE = re.compile(r"[A-Za-z0-9_-]+")
