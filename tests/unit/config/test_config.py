"""The configuration model: loading, env overrides, located errors, secret hygiene, helpers."""

import io
import json
import os
import ssl
import textwrap
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from ruamel.yaml import YAML

from offsetd.cli.config import config as config_cli
from offsetd.config import (
    REDACTED,
    ConnectCluster,
    KafkaCluster,
    Settings,
    is_secret_property,
    load_settings,
)
from offsetd.connect.transport import httpx_options
from offsetd.errors import ConfigError, OffsetdError

SECRETS = ("sasl-pw-1", "key-pw-2", "connect-pw-3", "oauth-secret-4")

FULL = textwrap.dedent("""\
    # offsetd test configuration
    kafka_clusters:
      east:
        bootstrap_servers: "127.0.0.1:9092"
      west:
        bootstrap_servers: "w1.example:9093, w2.example:9093"
        security_protocol: SASL_SSL
        tls:
          ca_file: /etc/offsetd/ca.pem
          cert_file: /etc/offsetd/client.pem
          key_file: /etc/offsetd/client.key
          key_password: key-pw-2
          check_hostname: false
        sasl:
          mechanism: SCRAM-SHA-512
          username: offsetd
          password: sasl-pw-1
        client_properties:
          linger.ms: 5
          sasl.oauthbearer.client.secret: oauth-secret-4
    connect_clusters:
      local:
        url: https://connect.example:8083
        auth: {username: admin, password: connect-pw-3}
        tls: {verify: false}
        kafka_cluster: west
        group_id: connect-west
        offsets_topic: west.offsets
        configs_topic: west.configs
        status_topic: west.status
        dlq_topics: [dlq-a, dlq_b]
        consumer_auto_offset_reset: latest
        orchestrator: strimzi
        strimzi:
          namespace: kafka
          kafka_connect: west-connect
          kubeconfig: /etc/offsetd/kubeconfig
          operator_timeout: 4m
        scope:
          connectors: [orders-*, payments-sink]
          labels: [team=payments]
    """)

FULL_REDACTED: dict[str, Any] = {
    "kafka_clusters": {
        "east": {
            "bootstrap_servers": "127.0.0.1:9092",
            "security_protocol": "PLAINTEXT",
            "tls": None,
            "sasl": None,
            "client_properties": {},
        },
        "west": {
            "bootstrap_servers": "w1.example:9093,w2.example:9093",
            "security_protocol": "SASL_SSL",
            "tls": {
                "ca_file": "/etc/offsetd/ca.pem",
                "cert_file": "/etc/offsetd/client.pem",
                "key_file": "/etc/offsetd/client.key",
                "key_password": REDACTED,
                "check_hostname": False,
            },
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "username": "offsetd",
                "password": REDACTED,
                "oauth": None,
            },
            "client_properties": {"linger.ms": "5", "sasl.oauthbearer.client.secret": REDACTED},
        },
    },
    "connect_clusters": {
        "local": {
            "url": "https://connect.example:8083",
            "auth": {"username": "admin", "password": REDACTED},
            "tls": {"ca_file": None, "cert_file": None, "key_file": None, "verify": False},
            "kafka_cluster": "west",
            "group_id": "connect-west",
            "offsets_topic": "west.offsets",
            "configs_topic": "west.configs",
            "status_topic": "west.status",
            "dlq_topics": ["dlq-a", "dlq_b"],
            "consumer_auto_offset_reset": "latest",
            "orchestrator": "strimzi",
            "strimzi": {
                "namespace": "kafka",
                "kafka_connect": "west-connect",
                "kubeconfig": "/etc/offsetd/kubeconfig",
                "context": None,
                "allow_gitops_managed": False,
                "operator_timeout": "4m",
            },
            "scope": {"connectors": ["orders-*", "payments-sink"], "labels": ["team=payments"]},
        }
    },
    "offsets": {"snapshots_topic": "offsetd.snapshots", "snapshots_kafka_cluster": None},
    "daemon": {
        "kafka_cluster": None,
        "app_id": "offsetd",
        "partitions": 8,
        "rules_dir": "rules/examples",
        "audit_topic": "offsetd.audit",
        "web_host": "127.0.0.1",
        "web_port": 6066,
        "data_dir": ".offsetd/state",
        "replication_factor": None,
        "group_session_timeout": "1m",
        "group_heartbeat_interval": "3s",
        "group_rebalance_timeout": "1m",
        "health_probe_interval": "5s",
        "stall_after": "2m",
        "suppressed_window": "10m",
        "compiled_engine": True,
    },
    "remediation": {
        "quarantine_topic": "offsetd.quarantine",
        "sagas_topic": "offsetd.sagas",
        "control_topic": "offsetd.control",
        "skip_allowlist": ["sink", "org.apache.kafka.connect.mirror.MirrorSourceConnector"],
        "opt_out": [],
        "scope": {"connectors": [], "labels": []},
        "skip_budget": {"max": 5, "per": "1h"},
        "blast_radius": {"max_failing_connectors": 3, "within": "5m", "settle": "5s"},
        "breaker_window": "10m",
        "max_poison_run": 5,
        "verify_stable_for": "2m",
        "stop_timeout": "1m",
        "resume_timeout": "2m",
        "locate_timeout": "2m",
        "webhook_timeout": "5s",
        "webhooks": {},
        "max_retries": 5,
    },
    "lag": {
        "enabled": True,
        "interval": "10s",
        "window": "10m",
        "flush_interval": "1m",
        "stall_after": "1m",
        "aggregate_per_topic": False,
        "seconds_lag_concurrency": 256,
        "seconds_lag_max_fetches": 2000,
        "list_offsets_batch": None,
        "slo_seconds": 300.0,
        "state_file": None,
        "failover_groups": [],
        "failover_max_checkpoint_age": "5m",
    },
    "progress": {"enabled": True, "events": True, "stall_after": None, "stuck_after": "6m"},
    "spark": {"master": "local[2]", "conf": {}},
}


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the developer's own OFFSETD_* variables out of every test."""
    for name in list(os.environ):
        if name.upper().startswith("OFFSETD_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsetd.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def line_of(text: str, needle: str) -> int:
    """1-based number of the first line of `text` containing `needle`."""
    for number, line in enumerate(textwrap.dedent(text).splitlines(), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in text")


def config_error(path: Path | None, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, environ or {})
    return str(info.value)


def assert_no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


# -- loading ------------------------------------------------------------------------------------


def test_full_file_loads_every_field(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL), {})

    assert settings.redacted() == FULL_REDACTED
    west = settings.kafka_clusters["west"]
    assert west.sasl is not None
    assert west.sasl.password is not None
    assert west.sasl.password.get_secret_value() == "sasl-pw-1"
    assert west.tls is not None
    assert west.tls.ca_file == Path("/etc/offsetd/ca.pem")


def test_show_output_loads_back_to_the_same_settings(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    shown = CliRunner().invoke(config_cli, ["show", "--config", str(path)])
    assert shown.exit_code == 0, shown.output

    again = load_settings(write(tmp_path, shown.stdout), {})

    assert again.redacted() == FULL_REDACTED


def test_empty_file_and_no_file_give_empty_settings(tmp_path: Path) -> None:
    assert load_settings(write(tmp_path, ""), {}) == Settings()
    assert load_settings(None, {}).kafka_clusters == {}
    assert load_settings(None, {}).connect_clusters == {}


def test_empty_sections_count_as_absent(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, "kafka_clusters:\nconnect_clusters:\n"), {})
    assert settings.kafka_clusters == {}


def test_defaults_are_filled_in(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        kafka_clusters: {k: {bootstrap_servers: "h:1"}}
        connect_clusters: {c: {url: "http://h:8083", kafka_cluster: k}}
        """,
    )
    connect = load_settings(path, {}).connect_clusters["c"]
    assert (connect.group_id, connect.offsets_topic, connect.configs_topic) == (
        "connect-cluster",
        "connect-offsets",
        "connect-configs",
    )
    assert (connect.status_topic, connect.dlq_topics, connect.orchestrator) == (
        "connect-status",
        [],
        "none",
    )


def test_failover_settings_load_with_their_defaults(tmp_path: Path) -> None:
    assert (Settings().lag.failover_groups, Settings().lag.failover_max_checkpoint_age) == (
        [],
        300_000,
    )
    path = write(
        tmp_path,
        """\
        lag:
          failover_groups: [orders-*, "billing v2", "team-[ab]"]
          failover_max_checkpoint_age: 2m30s
        """,
    )
    lag = load_settings(path, {}).lag
    assert lag.failover_groups == ["orders-*", "billing v2", "team-[ab]"]
    assert lag.failover_max_checkpoint_age == 150_000
    empty = load_settings(write(tmp_path, "lag:\n  failover_groups:\n"), {})
    assert empty.lag.failover_groups == []
    from_env = load_settings(None, {"OFFSETD_LAG__FAILOVER_GROUPS": '["orders-*"]'})
    assert from_env.lag.failover_groups == ["orders-*"]


# -- environment --------------------------------------------------------------------------------


def test_env_deep_merges_one_nested_field(tmp_path: Path) -> None:
    environ = {"OFFSETD_KAFKA_CLUSTERS__WEST__SASL__PASSWORD": "from-env"}

    settings = load_settings(write(tmp_path, FULL), environ)

    sasl = settings.kafka_clusters["west"].sasl
    assert sasl is not None
    assert sasl.password is not None
    assert sasl.password.get_secret_value() == "from-env"
    assert (sasl.username, sasl.mechanism) == ("offsetd", "SCRAM-SHA-512")
    assert (
        settings.kafka_clusters["west"].tls
        == load_settings(write(tmp_path, FULL), {}).kafka_clusters["west"].tls
    )
    assert settings.redacted() == FULL_REDACTED  # nothing else moved


def test_env_wins_over_file_and_takes_json_for_lists(tmp_path: Path) -> None:
    environ = {
        "OFFSETD_CONNECT_CLUSTERS__LOCAL__GROUP_ID": "from-env",
        "OFFSETD_CONNECT_CLUSTERS__LOCAL__DLQ_TOPICS": '["x", "y"]',
    }
    local = load_settings(write(tmp_path, FULL), environ).connect_clusters["local"]
    assert local.group_id == "from-env"
    assert local.dlq_topics == ["x", "y"]
    assert local.offsets_topic == "west.offsets"


def test_env_names_are_case_insensitive_and_match_file_aliases(tmp_path: Path) -> None:
    path = write(tmp_path, 'kafka_clusters: {EastDC: {bootstrap_servers: "h:1"}}\n')
    environ = {"offsetd_kafka_clusters__eastdc__bootstrap_servers": "h:2"}
    assert load_settings(path, environ).kafka_clusters["EastDC"].bootstrap_servers == "h:2"


def test_env_alone_builds_clusters() -> None:
    environ = {
        "OFFSETD_KAFKA_CLUSTERS__EAST__BOOTSTRAP_SERVERS": "h:1",
        "OFFSETD_CONNECT_CLUSTERS__LOCAL__URL": "http://h:8083",
        "OFFSETD_CONNECT_CLUSTERS__LOCAL__KAFKA_CLUSTER": "east",
        "OFFSETD_CONFIG": "elsewhere.yaml",  # the CLI's variable, not a setting
        "UNRELATED": "x",
    }
    settings = load_settings(None, environ)
    assert settings.connect_clusters["local"].kafka_cluster == "east"


def test_passed_environ_replaces_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFSETD_KAFKA_CLUSTERS__X__BOOTSTRAP_SERVERS", "not valid")
    assert load_settings(None, {}).kafka_clusters == {}
    with pytest.raises(ConfigError, match="OFFSETD_KAFKA_CLUSTERS__X__BOOTSTRAP_SERVERS"):
        load_settings(None)  # default: os.environ


def test_bare_settings_reads_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OFFSETD_KAFKA_CLUSTERS__X__BOOTSTRAP_SERVERS", "h:1")
    assert Settings().kafka_clusters["x"].bootstrap_servers == "h:1"


def test_env_error_names_the_variable(tmp_path: Path) -> None:
    message = config_error(
        write(tmp_path, FULL), {"OFFSETD_CONNECT_CLUSTERS__LOCAL__URL": "ftp://h:8083"}
    )
    assert message.startswith(
        "environment OFFSETD_CONNECT_CLUSTERS__LOCAL__URL: connect_clusters.local.url: "
    )
    assert "\n" not in message


def test_env_bad_json_names_the_variable() -> None:
    message = config_error(None, {"OFFSETD_CONNECT_CLUSTERS__LOCAL__DLQ_TOPICS": "[oops"})
    assert message.startswith("environment OFFSETD_CONNECT_CLUSTERS__LOCAL__DLQ_TOPICS: ")


def test_env_only_cluster_error_names_its_variables() -> None:
    message = config_error(None, {"OFFSETD_KAFKA_CLUSTERS__NORTH__SECURITY_PROTOCOL": "SSL"})
    assert message == (
        "environment OFFSETD_KAFKA_CLUSTERS__NORTH__SECURITY_PROTOCOL: "
        "kafka_clusters.north.bootstrap_servers: required field is missing"
    )


# -- located errors -----------------------------------------------------------------------------

GOOD_CONNECT = """\
    connect_clusters:
      local:
        url: http://127.0.0.1:8083
        kafka_cluster: east
"""


@pytest.mark.parametrize(
    ("text", "needle", "field", "fragment"),
    [
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                security_protocol: SSL
                tls:
                  check_hostname: [yes]
            """,
            "check_hostname",
            "kafka_clusters.east.tls.check_hostname",
            "valid boolean",
            id="wrong-type",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                bootstrap_server: "h:2"
            """,
            "bootstrap_server:",
            "kafka_clusters.east.bootstrap_server",
            "unknown key",
            id="unknown-key",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
            connect_clusters:
              local:
                url: http://127.0.0.1:8083
                kafka_cluster: north
            """,
            "north",
            "connect_clusters.local.kafka_cluster",
            "unknown Kafka cluster alias 'north' (known: east)",
            id="bad-alias",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                security_protocol: SASL_SSL
            """,
            "east:",
            "kafka_clusters.east.sasl",
            "required when security_protocol is SASL_SSL",
            id="missing-sasl",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                sasl: {mechanism: PLAIN, username: u, password: p}
            """,
            "sasl:",
            "kafka_clusters.east.sasl",
            "not PLAINTEXT",
            id="sasl-without-sasl-protocol",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
            connect_clusters:
              local:
                url: http://127.0.0.1:8083
                kafka_cluster: east
                offsets_topic: "bad/topic"
            """,
            "bad/topic",
            "connect_clusters.local.offsets_topic",
            "invalid Kafka topic name 'bad/topic'",
            id="invalid-topic",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
            connect_clusters:
              local:
                url: http://127.0.0.1:8083
                kafka_cluster: east
                dlq_topics:
                  - fine
                  - "not fine"
            """,
            "not fine",
            "connect_clusters.local.dlq_topics[1]",
            "invalid Kafka topic name",
            id="invalid-topic-in-list",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                client_properties:
                  sasl.password: nope
            """,
            "sasl.password",
            'kafka_clusters.east.client_properties["sasl.password"]',
            "dedicated field",
            id="managed-client-property",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h"
            """,
            'bootstrap_servers: "h"',
            "kafka_clusters.east.bootstrap_servers",
            "'h' is not host:port",
            id="bootstrap-without-port",
        ),
        pytest.param(
            """\
            lag:
              failover_groups:
                - orders-*
                - " billing"
            """,
            "billing",
            "lag.failover_groups[1]",
            "has a space at one end",
            id="failover-group-with-a-space",
        ),
        pytest.param(
            """\
            lag:
              failover_groups: [orders-*, ""]
            """,
            "failover_groups",
            "lag.failover_groups[1]",
            "at least 1 character",
            id="failover-group-empty",
        ),
        pytest.param(
            """\
            lag:
              failover_groups: orders-*
            """,
            "failover_groups",
            "lag.failover_groups",
            "valid list",
            id="failover-groups-not-a-list",
        ),
        pytest.param(
            """\
            lag:
              failover_max_checkpoint_age: 5 minutes
            """,
            "failover_max_checkpoint_age",
            "lag.failover_max_checkpoint_age",
            "invalid duration",
            id="failover-max-age-not-a-duration",
        ),
        pytest.param(
            """\
            lag:
              failover_max_checkpoint_age: 500ms
            """,
            "failover_max_checkpoint_age",
            "lag.failover_max_checkpoint_age",
            "greater than or equal to 1000",
            id="failover-max-age-too-short",
        ),
    ],
)
def test_errors_name_file_line_and_field(
    tmp_path: Path, text: str, needle: str, field: str, fragment: str
) -> None:
    path = write(tmp_path, text)

    message = config_error(path)

    assert message.startswith(f"{path}:{line_of(text, needle)}: {field}: "), message
    assert fragment in message
    assert "\n" not in message


def test_example_message_from_the_spec(tmp_path: Path) -> None:
    text = """\
        kafka_clusters:
          east: {bootstrap_servers: "h:1"}
          west: {bootstrap_servers: "h:2"}
        connect_clusters:
          local:
            url: http://127.0.0.1:8083
            kafka_cluster: north
        """
    path = write(tmp_path, text)
    assert config_error(path) == (
        f"{path}:7: connect_clusters.local.kafka_cluster: "
        "unknown Kafka cluster alias 'north' (known: east, west)"
    )


def test_every_error_is_reported_one_per_line(tmp_path: Path) -> None:
    text = """\
        kafka_clusters:
          east:
            bootstrap_server: "h:1"
            security_protocol: TLS
        connect_clusters:
          local:
            url: "localhost:8083"
            kafka_cluster: east
        """
    path = write(tmp_path, text)

    lines = config_error(path).splitlines()

    assert sorted(lines) == sorted(
        [
            f"{path}:2: kafka_clusters.east.bootstrap_servers: required field is missing",
            f"{path}:3: kafka_clusters.east.bootstrap_server: unknown key",
            f"{path}:4: kafka_clusters.east.security_protocol: "
            "Input should be 'PLAINTEXT', 'SSL', 'SASL_PLAINTEXT' or 'SASL_SSL'",
            f"{path}:7: connect_clusters.local.url: "
            "must be an http:// or https:// URL with a host and optional port",
        ]
    )


def test_unknown_top_level_keys_are_errors(tmp_path: Path) -> None:
    # `_env_file` is also a BaseSettings init option: it must be rejected, not obeyed.
    path = write(tmp_path, "dashboard: {}\n_env_file: .env\n")
    assert sorted(config_error(path).splitlines()) == [
        f"{path}:1: dashboard: unknown key",
        f"{path}:2: _env_file: unknown key",
    ]


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    text = """\
        kafka_clusters:
          east:
            bootstrap_servers: "h:1"
           bad_indent: [
        """
    message = config_error(write(tmp_path, text))
    assert message.startswith(f"{tmp_path / 'offsetd.yaml'}:4: invalid YAML: ")


def test_duplicate_key_is_an_error_without_its_values(tmp_path: Path) -> None:
    text = """\
        kafka_clusters:
          east:
            bootstrap_servers: "h:1"
            security_protocol: SASL_SSL
            sasl: {mechanism: PLAIN, username: u, password: sasl-pw-1, password: key-pw-2}
        """
    message = config_error(write(tmp_path, text))
    assert message == f"{tmp_path / 'offsetd.yaml'}:5: invalid YAML: duplicate key"


def test_missing_file_is_one_sentence(tmp_path: Path) -> None:
    message = config_error(tmp_path / "absent.yaml")
    assert message == f"configuration file {tmp_path / 'absent.yaml'} does not exist"


@pytest.mark.parametrize(
    ("text", "kind"), [("- a\n- b\n", "a list"), ("hello\n", "a single value")]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, kind: str) -> None:
    message = config_error(write(tmp_path, text))
    assert "top level must be a mapping" in message
    assert message.endswith(f"not {kind}")


def test_unsupported_yaml_value_is_located(tmp_path: Path) -> None:
    text = """\
        kafka_clusters:
          east:
            bootstrap_servers: !vault "h:1"
        """
    message = config_error(write(tmp_path, text))
    assert message.startswith(
        f"{tmp_path / 'offsetd.yaml'}:3: kafka_clusters.east.bootstrap_servers"
    )


def test_config_error_is_an_offsetd_error_with_exit_code_2() -> None:
    assert issubclass(ConfigError, OffsetdError)
    assert ConfigError.exit_code == 2
    assert OffsetdError.exit_code == 1


# -- secrets ------------------------------------------------------------------------------------


def test_secrets_stay_out_of_repr_str_and_redacted(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, FULL), {})
    for rendering in (repr(settings), str(settings), json.dumps(settings.redacted())):
        assert_no_secret(rendering)
    assert_no_secret(repr(settings.kafka_clusters["west"]))
    assert_no_secret(settings.model_dump_json())


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                security_protocol: SASL_SSL
                sasl: {mechanism: PLAIN, username: u, password: {nested: sasl-pw-1}}
            """,
            id="password-of-wrong-type",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                security_protocol: SASL_SSL
                sasl: {mechanism: NOPE, password: sasl-pw-1}
            """,
            id="invalid-neighbour-and-missing-field",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                bootstrap_servers: "h:1"
                client_properties:
                  sasl.oauthbearer.client.secret: [oauth-secret-4]
            """,
            id="secret-property-of-wrong-type",
        ),
        pytest.param(
            """\
            kafka_clusters: {east: {bootstrap_servers: "h:1"}}
            connect_clusters:
              local: {url: "http://admin:connect-pw-3@h:8083", kafka_cluster: east}
            """,
            id="credentials-in-url",
        ),
        pytest.param(
            """\
            kafka_clusters:
              east:
                sasl: {password: "sasl-pw-1
            """,
            id="yaml-syntax-error-on-secret-line",
        ),
    ],
)
def test_secrets_stay_out_of_error_messages(tmp_path: Path, text: str) -> None:
    message = config_error(write(tmp_path, text))
    assert message  # it did fail
    assert_no_secret(message)


def test_secret_from_env_stays_out_of_error_messages() -> None:
    environ = {
        "OFFSETD_KAFKA_CLUSTERS__EAST__BOOTSTRAP_SERVERS": "h:1",
        "OFFSETD_KAFKA_CLUSTERS__EAST__SASL": '{"password": "sasl-pw-1"}',
        "OFFSETD_CONNECT_CLUSTERS__X__AUTH": '{"password": "connect-pw-3"',  # bad JSON
    }
    assert_no_secret(config_error(None, environ))
    del environ["OFFSETD_CONNECT_CLUSTERS__X__AUTH"]
    message = config_error(None, environ)
    assert "OFFSETD_KAFKA_CLUSTERS__EAST__SASL" in message
    assert_no_secret(message)


def test_config_error_carries_no_validation_error_context(tmp_path: Path) -> None:
    """A logged traceback would print the ValidationError, which quotes input values."""
    text = """\
        kafka_clusters:
          east: {bootstrap_servers: "h:1", sasl: {mechanism: PLAIN, password: sasl-pw-1}}
        """
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, text), {})
    assert info.value.__cause__ is None
    assert info.value.__context__ is None


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.text(min_size=1, max_size=40))
def test_any_password_stays_out_of_messages(tmp_path: Path, secret: str) -> None:
    marked = f"S3CR3T{secret}"
    data = {
        "kafka_clusters": {
            "east": {
                "bootstrap_servers": "not-a-host-port",
                "security_protocol": "SASL_SSL",
                "sasl": {"mechanism": "PLAIN", "password": marked},  # username missing
            }
        }
    }
    buffer = io.StringIO()
    YAML().dump(data, buffer)
    path = write(tmp_path, buffer.getvalue())
    message = config_error(path)
    assert "S3CR3T" not in message
    assert config_error(None, {"OFFSETD_KAFKA_CLUSTERS": json.dumps(data)}).count("\n") == 1


def test_is_secret_property() -> None:
    assert is_secret_property("sasl.oauthbearer.client.secret")
    assert is_secret_property("ssl.keystore.password")
    assert is_secret_property("SASL.OAUTHBEARER.TOKEN.ENDPOINT.URL")
    assert not is_secret_property("linger.ms")


# -- helpers ------------------------------------------------------------------------------------


def test_client_config_maps_tls_and_sasl(tmp_path: Path) -> None:
    west = load_settings(write(tmp_path, FULL), {}).kafka_clusters["west"]
    assert west.client_config() == {
        "bootstrap.servers": "w1.example:9093,w2.example:9093",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": "/etc/offsetd/ca.pem",
        "ssl.certificate.location": "/etc/offsetd/client.pem",
        "ssl.key.location": "/etc/offsetd/client.key",
        "ssl.key.password": "key-pw-2",
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "offsetd",
        "sasl.password": "sasl-pw-1",
        "linger.ms": "5",
        "sasl.oauthbearer.client.secret": "oauth-secret-4",
    }


def test_client_config_for_plain_and_bare_ssl() -> None:
    plain = KafkaCluster.model_validate({"bootstrap_servers": "h:1"})
    assert plain.client_config() == {"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT"}
    ssl_only = KafkaCluster.model_validate({"bootstrap_servers": "h:1", "security_protocol": "ssl"})
    assert ssl_only.client_config() == {
        "bootstrap.servers": "h:1",
        "security.protocol": "SSL",
        "ssl.endpoint.identification.algorithm": "https",
    }
    scram = KafkaCluster.model_validate(
        {
            "bootstrap_servers": "h:1",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl": {"mechanism": "SCRAM-SHA-256", "username": "u", "password": "p"},
        }
    )
    config = scram.client_config()
    assert config["sasl.mechanism"] == "SCRAM-SHA-256"
    assert not [key for key in config if key.startswith("ssl.")]


def _connect(**extra: Any) -> ConnectCluster:
    return ConnectCluster.model_validate(
        {"url": "https://connect.example:8083", "kafka_cluster": "k", **extra}
    )


def test_httpx_options_default_and_no_verify(tmp_path: Path) -> None:
    default = httpx_options(_connect())
    verify = default.pop("verify")
    # over TLS, a transport that reports a TLS alert read after the handshake (a refused
    # client certificate) as an httpx transport error, like a failed handshake
    assert isinstance(default.pop("transport"), httpx.AsyncHTTPTransport)
    assert default == {"base_url": "https://connect.example:8083", "auth": None}
    # httpx's own default trust (certifi), loaded once and shared by every client of the cluster
    assert isinstance(verify, ssl.SSLContext)
    assert verify.get_ca_certs()
    assert verify.verify_mode == ssl.CERT_REQUIRED
    assert verify.check_hostname
    assert httpx_options(_connect())["verify"] is verify

    opts = httpx_options(load_settings(write(tmp_path, FULL), {}).connect_clusters["local"])
    assert opts["verify"] is False
    auth = opts["auth"]
    assert isinstance(auth, httpx.BasicAuth)
    request = next(auth.auth_flow(httpx.Request("GET", "https://connect.example:8083/")))
    assert request.headers["Authorization"] == httpx.BasicAuth("admin", "connect-pw-3")._auth_header
    with httpx.Client(**opts) as client:
        assert client.base_url.host == "connect.example"


def test_httpx_options_ca_file_gives_ssl_context() -> None:
    # certifi's bundle is a real CA file that is always installed alongside httpx.
    verify = httpx_options(_connect(tls={"ca_file": certifi.where()}))["verify"]
    assert isinstance(verify, ssl.SSLContext)
    assert verify.verify_mode == ssl.CERT_REQUIRED
    assert verify.get_ca_certs()


def test_httpx_options_reads_a_rotated_ca_file_again(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(Path(certifi.where()).read_bytes())
    cluster = _connect(tls={"ca_file": str(ca)})
    first = httpx_options(cluster)["verify"]
    assert httpx_options(cluster)["verify"] is first
    os.utime(ca, ns=(ca.stat().st_atime_ns, ca.stat().st_mtime_ns + 1_000_000_000))
    assert httpx_options(cluster)["verify"] is not first


def test_httpx_options_plain_http_builds_no_ssl_context() -> None:
    # No TLS on the wire: loading a CA bundle would only cost start-up time.
    plain = ConnectCluster.model_validate({"url": "http://h:8083", "kafka_cluster": "k"})
    assert httpx_options(plain)["verify"] is False
    assert httpx_options(_connect())["verify"] is not False


def test_httpx_options_missing_ca_file_is_a_config_error(tmp_path: Path) -> None:
    cluster = _connect(tls={"ca_file": str(tmp_path / "nope.pem")})
    with pytest.raises(ConfigError, match=r"cannot load tls\.ca_file for Connect cluster at"):
        httpx_options(cluster)


def test_tls_only_with_https() -> None:
    with pytest.raises(ValidationError, match="only used with an https"):
        ConnectCluster.model_validate(
            {"url": "http://h:8083", "kafka_cluster": "k", "tls": {"verify": False}}
        )


# -- topic names --------------------------------------------------------------------------------

TOPIC_ALPHABET = "abcxyzABCXYZ0189._-"


@given(
    st.text(alphabet=TOPIC_ALPHABET, min_size=1, max_size=249).filter(
        lambda t: t not in {".", ".."}
    )
)
def test_valid_topic_names_are_accepted(topic: str) -> None:
    assert _connect(dlq_topics=[topic]).dlq_topics == [topic]


@given(
    st.one_of(
        st.text(min_size=1)
        .filter(lambda t: any(ch not in TOPIC_ALPHABET for ch in t))
        .filter(lambda t: not all(ch.isascii() and (ch.isalnum() or ch in "._-") for ch in t)),
        st.just(""),
        st.just("a" * 250),
        st.just(".."),
    )
)
def test_invalid_topic_names_are_rejected(topic: str) -> None:
    with pytest.raises(ValidationError):
        _connect(dlq_topics=[topic])


# -- CLI ----------------------------------------------------------------------------------------


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_check_succeeds(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(config_cli, ["check", "--config", str(write(tmp_path, FULL))])
    assert result.exit_code == 0
    assert result.stdout == "ok: 2 Kafka clusters, 1 Connect cluster\n"


def test_check_takes_the_path_from_offsetd_config(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    result = runner.invoke(config_cli, ["check"], env={"OFFSETD_CONFIG": str(path)})
    assert result.exit_code == 0, result.output


def test_check_fails_with_the_message(runner: CliRunner, tmp_path: Path) -> None:
    text = FULL.replace("kafka_cluster: west", "kafka_cluster: north")
    path = write(tmp_path, text)

    result = runner.invoke(config_cli, ["check", "--config", str(path)])

    assert result.exit_code == 2
    assert result.stdout == ""
    line = line_of(text, "kafka_cluster: north")
    assert result.stderr == (
        f"{path}:{line}: connect_clusters.local.kafka_cluster: "
        "unknown Kafka cluster alias 'north' (known: east, west)\n"
    )
    assert "Traceback" not in result.output


def test_check_applies_env_overrides(runner: CliRunner, tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    env = {"OFFSETD_CONNECT_CLUSTERS__LOCAL__URL": "nope"}
    result = runner.invoke(config_cli, ["check", "--config", str(path)], env=env)
    assert result.exit_code == 2
    assert result.stderr.startswith("environment OFFSETD_CONNECT_CLUSTERS__LOCAL__URL: ")


@pytest.mark.parametrize("output", ["yaml", "json"])
def test_show_redacts_secrets(runner: CliRunner, tmp_path: Path, output: str) -> None:
    path = write(tmp_path, FULL)
    secret_property = json.dumps({"sasl.oauthbearer.client.secret": "oauth-secret-4"})
    env = {"OFFSETD_KAFKA_CLUSTERS__EAST__CLIENT_PROPERTIES": secret_property}

    result = runner.invoke(config_cli, ["show", "--config", str(path), "--output", output], env=env)

    assert result.exit_code == 0, result.output
    assert_no_secret(result.output)
    loaded = json.loads(result.stdout) if output == "json" else YAML(typ="safe").load(result.stdout)
    assert loaded["kafka_clusters"]["west"]["sasl"]["password"] == REDACTED
    assert loaded["kafka_clusters"]["east"]["client_properties"] == {
        "sasl.oauthbearer.client.secret": REDACTED
    }
