"""`offsetd config ...`: validate and display the configuration without touching any cluster."""

import io
import json
from pathlib import Path

import click
from ruamel.yaml import YAML

from offsetd.config import CONFIG_PATH_ENV_VAR, DEFAULT_CONFIG_PATH, Settings, load_settings
from offsetd.errors import ConfigError

__all__ = ["check", "config", "show"]

_config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=DEFAULT_CONFIG_PATH,
    envvar=CONFIG_PATH_ENV_VAR,
    show_default=True,
    show_envvar=True,
    help="The offsetd YAML file; OFFSETD_* variables override its values.",
)


def _load(config_path: Path) -> Settings:
    try:
        return load_settings(config_path)
    except ConfigError as exc:
        message, code = str(exc), exc.exit_code
    # Outside the except block, so no traceback context; the message says it all.
    click.echo(message, err=True)
    raise SystemExit(code)


@click.group("config")
def config() -> None:
    """Validate and display the offsetd configuration."""


@config.command()
@_config_option
def check(config_path: Path) -> None:
    """Validate the configuration file and environment; exit 2 on errors."""
    settings = _load(config_path)
    kafka, connect = len(settings.kafka_clusters), len(settings.connect_clusters)
    click.echo(
        f"ok: {kafka} Kafka cluster{'s' * (kafka != 1)}, "
        f"{connect} Connect cluster{'s' * (connect != 1)}"
    )


@config.command()
@_config_option
@click.option(
    "--output",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="Output format.",
)
def show(config_path: Path, output: str) -> None:
    """Print the effective configuration (file + environment), secrets redacted."""
    data = _load(config_path).redacted()
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    yaml = YAML()  # round-trip dumper: keeps field order
    yaml.default_flow_style = False
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    click.echo(buffer.getvalue(), nl=False)
