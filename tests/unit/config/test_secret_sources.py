"""Secrets from files and environment variables: the forms Kubernetes Secrets are mounted in.

Every secret field (SASL and Connect passwords, a TLS key's password, named webhooks, client
properties) takes `{file: path}` or `{env: NAME}` as well as an inline value; errors name the
file or variable and the config line, never the value.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offsetd.cli.config import config as config_cli
from offsetd.config import load_settings
from offsetd.errors import ConfigError

SECRET = "s3cr3t-from-a-mounted-file"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsetd.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def mounted(tmp_path: Path, name: str, value: str) -> Path:
    """A Secret key as Kubernetes mounts it: one file, often with a trailing newline."""
    path = tmp_path / "secrets" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(value)
    return path


CONFIG = """\
    kafka_clusters:
      main:
        bootstrap_servers: "k:9093"
        security_protocol: SASL_SSL
        tls:
          cert_file: /etc/c.pem
          key_file: /etc/c.key
          key_password: {{env: TLS_KEY_PASSWORD}}
        sasl:
          mechanism: SCRAM-SHA-512
          username: offsetd
          password: {{file: {sasl}}}
        client_properties:
          sasl.oauthbearer.client.secret: {{file: {oauth}}}
    connect_clusters:
      local:
        url: https://connect.example:8083
        auth: {{username: offsetd, password: {{env: CONNECT_PASSWORD}}}}
        kafka_cluster: main
    remediation:
      webhooks:
        oncall: {{file: {hook}}}
    """


def test_every_secret_field_reads_a_mounted_file_or_a_named_variable(tmp_path: Path) -> None:
    sasl = mounted(tmp_path, "sasl-password", SECRET + "\n")
    oauth = mounted(tmp_path, "oauth", "oauth-from-file")
    hook = mounted(tmp_path, "webhook", "https://hooks.example/T0K3N\n")
    path = write(tmp_path, CONFIG.format(sasl=sasl, oauth=oauth, hook=hook))
    settings = load_settings(
        path, {"TLS_KEY_PASSWORD": "key-from-env", "CONNECT_PASSWORD": "connect-from-env"}
    )
    client = settings.kafka_clusters["main"].client_config()
    assert client["sasl.password"] == SECRET  # the trailing newline is not part of it
    assert client["ssl.key.password"] == "key-from-env"
    assert client["sasl.oauthbearer.client.secret"] == "oauth-from-file"
    auth = settings.connect_clusters["local"].auth
    assert auth is not None
    assert auth.password.get_secret_value() == "connect-from-env"
    webhook = settings.remediation.webhooks["oncall"].get_secret_value()
    assert webhook == "https://hooks.example/T0K3N"


def test_the_offsetd_variables_can_name_a_file_too(tmp_path: Path) -> None:
    sasl = mounted(tmp_path, "sasl-password", SECRET)
    path = write(
        tmp_path,
        """\
        kafka_clusters:
          main:
            bootstrap_servers: "k:9093"
            security_protocol: SASL_SSL
            sasl: {mechanism: PLAIN, username: offsetd, password: placeholder}
        """,
    )
    settings = load_settings(
        path, {"OFFSETD_KAFKA_CLUSTERS__MAIN__SASL__PASSWORD__FILE": str(sasl)}
    )
    assert settings.kafka_clusters["main"].client_config()["sasl.password"] == SECRET


def test_a_missing_secret_file_names_the_file_and_the_line_not_a_value(tmp_path: Path) -> None:
    gone = tmp_path / "secrets" / "nope"
    sasl = mounted(tmp_path, "sasl", SECRET)
    empty = mounted(tmp_path, "empty", "\n")
    path = write(
        tmp_path,
        CONFIG.format(sasl=sasl, oauth=gone, hook=empty),
    )
    with pytest.raises(ConfigError) as raised:
        load_settings(path, {"TLS_KEY_PASSWORD": "k"})
    lines = str(raised.value).splitlines()
    assert lines == [
        f'{path}:14: kafka_clusters.main.client_properties["sasl.oauthbearer.client.secret"]: '
        f"secret file {gone} does not exist",
        f"{path}:18: connect_clusters.local.auth.password: environment variable "
        "CONNECT_PASSWORD (named by this secret) is not set",
        f"{path}:22: remediation.webhooks.oncall: secret file {empty} is empty",
    ]
    assert SECRET not in str(raised.value)


def test_config_show_never_prints_a_secret_from_a_file(tmp_path: Path) -> None:
    sasl = mounted(tmp_path, "sasl-password", SECRET)
    oauth = mounted(tmp_path, "oauth", SECRET + "-oauth")
    hook = mounted(tmp_path, "webhook", f"https://hooks.example/{SECRET}")
    path = write(tmp_path, CONFIG.format(sasl=sasl, oauth=oauth, hook=hook))
    result = CliRunner().invoke(
        config_cli,
        ["show", "--config", str(path)],
        env={"TLS_KEY_PASSWORD": SECRET + "-key", "CONNECT_PASSWORD": SECRET + "-connect"},
    )
    assert result.exit_code == 0, result.output
    assert "offsetd" in result.output
    assert SECRET not in result.output
