"""`Settings`: the whole configuration, its cross-section checks, and how values reach it.

Environment variables are `OFFSETD_` + the field path joined by `__`. `load_settings`
(`offsetd.config.sources`) merges the file and the environment itself, to say where each
problem came from, and hands the merged values to `Settings` through `PREPARED_INPUT`.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Annotated, Any, Self

from pydantic import Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from offsetd.config.connect_clusters import ConnectCluster
from offsetd.config.fields import Alias, none_to_empty
from offsetd.config.kafka_clusters import KafkaCluster
from offsetd.config.sections import (
    DaemonSettings,
    LagSettings,
    OffsetsSettings,
    ProgressSettings,
    RemediationSettings,
    SparkSettings,
)
from offsetd.errors import ConfigError
from offsetd.yamlerrors import LocatedError

__all__ = ["ENV_NESTED_DELIMITER", "ENV_PREFIX", "PREPARED_INPUT", "PreparedSource", "Settings"]

ENV_PREFIX = "OFFSETD_"
ENV_NESTED_DELIMITER = "__"


class Settings(BaseSettings):
    """The whole offsetd configuration. Build it with `load_settings`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
    )

    kafka_clusters: Annotated[dict[Alias, KafkaCluster], none_to_empty(dict)] = Field(
        default_factory=dict
    )
    connect_clusters: Annotated[dict[Alias, ConnectCluster], none_to_empty(dict)] = Field(
        default_factory=dict
    )
    offsets: Annotated[OffsetsSettings, none_to_empty(OffsetsSettings)] = Field(
        default_factory=OffsetsSettings
    )
    daemon: Annotated[DaemonSettings, none_to_empty(DaemonSettings)] = Field(
        default_factory=DaemonSettings
    )
    lag: Annotated[LagSettings, none_to_empty(LagSettings)] = Field(default_factory=LagSettings)
    progress: Annotated[ProgressSettings, none_to_empty(ProgressSettings)] = Field(
        default_factory=ProgressSettings
    )
    spark: Annotated[SparkSettings, none_to_empty(SparkSettings)] = Field(
        default_factory=SparkSettings
    )
    remediation: Annotated[RemediationSettings, none_to_empty(RemediationSettings)] = Field(
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
        prepared = PREPARED_INPUT.get()
        if prepared is not None:  # inside load_settings: file and environ already merged
            return (PreparedSource(settings_cls, prepared),)
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
        stall_after, flush = self.progress.stall_after, self.lag.flush_interval
        if stall_after is not None and stall_after < 3 * flush:
            problems.append(
                (
                    ("progress", "stall_after"),
                    f"must be at least 3 x lag.flush_interval ({3 * flush // 1000}s): a sink "
                    "commits once per flush interval, so a shorter wait cannot tell a stall "
                    "from a commit still to come",
                )
            )
        if problems:
            raise LocatedError(problems)
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


# BaseSettings runs its sources in __init__, even under model_validate. load_settings merges
# file and environment itself (to locate errors), then hands the result over through this.
PREPARED_INPUT: ContextVar[dict[str, Any] | None] = ContextVar("offsetd_prepared", default=None)


class PreparedSource(PydanticBaseSettingsSource):
    """All values at once, as merged by load_settings (unknown keys included, to be rejected)."""

    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data
