"""The offsetd configuration: pydantic models, loaded from `offsetd.yaml` plus environment.

Precedence (highest first): environment variables, the YAML file, model defaults. Environment
variables are `OFFSETD_` + the field path joined by `__`, matched case-insensitively, e.g.
`OFFSETD_KAFKA_CLUSTERS__WEST__SASL__PASSWORD`; they deep-merge into the file's values, so one
variable changes one field. List and mapping fields take JSON
(`OFFSETD_CONNECT_CLUSTERS__LOCAL__DLQ_TOPICS='["dlq-a"]'`).

Error messages name where the bad value came from (`offsetd.yaml:14: <field.path>: ...` or
`environment OFFSETD_...: <field.path>: ...`). They quote values only of plain fields (topic
names, aliases, servers) and never input values in general, which may be secrets.

The modules, one concern each: `fields` (shared field types), `kafka_clusters` and
`connect_clusters` (the cluster models), `sections` (daemon, offsets, remediation, lag, Spark),
`settings` (the whole), `sources` (file + environment) and `locating` (where an error came from).
"""

from offsetd.config.connect_clusters import ConnectAuth, ConnectCluster, ConnectorScope, ConnectTls
from offsetd.config.fields import REDACTED, is_secret_property
from offsetd.config.kafka_clusters import (
    KafkaCluster,
    KafkaOAuth,
    KafkaSasl,
    KafkaTls,
    SaslMechanism,
    SecurityProtocol,
)
from offsetd.config.sections import (
    BlastRadius,
    DaemonSettings,
    LagSettings,
    OffsetsSettings,
    ProgressSettings,
    RemediationSettings,
    SkipBudget,
    SparkSettings,
)
from offsetd.config.settings import ENV_NESTED_DELIMITER, ENV_PREFIX, Settings
from offsetd.config.sources import CONFIG_PATH_ENV_VAR, DEFAULT_CONFIG_PATH, load_settings

__all__ = [
    "CONFIG_PATH_ENV_VAR",
    "DEFAULT_CONFIG_PATH",
    "ENV_NESTED_DELIMITER",
    "ENV_PREFIX",
    "REDACTED",
    "BlastRadius",
    "ConnectAuth",
    "ConnectCluster",
    "ConnectTls",
    "ConnectorScope",
    "DaemonSettings",
    "KafkaCluster",
    "KafkaOAuth",
    "KafkaSasl",
    "KafkaTls",
    "LagSettings",
    "OffsetsSettings",
    "ProgressSettings",
    "RemediationSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "Settings",
    "SkipBudget",
    "SparkSettings",
    "is_secret_property",
    "load_settings",
]
