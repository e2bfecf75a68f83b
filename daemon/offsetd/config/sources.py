"""Where the configuration comes from: the YAML file, then the environment, merged and validated.

Precedence (highest first): environment variables, the YAML file, model defaults. Variables
deep-merge into the file's values, so one variable changes one field. Every problem is reported
with where its value came from (`offsetd.config.locating`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsError
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from offsetd.config.fields import SECRET_ENVIRON
from offsetd.config.locating import Locator, format_errors
from offsetd.config.settings import ENV_NESTED_DELIMITER, ENV_PREFIX, PREPARED_INPUT, Settings
from offsetd.errors import ConfigError
from offsetd.yamlerrors import YamlFileError, plain, read_yaml

__all__ = ["CONFIG_PATH_ENV_VAR", "DEFAULT_CONFIG_PATH", "load_settings"]

DEFAULT_CONFIG_PATH = Path("offsetd.yaml")
CONFIG_PATH_ENV_VAR = "OFFSETD_CONFIG"


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

    token = PREPARED_INPUT.set(_deep_merge(file_data, env_data))
    environ_token = SECRET_ENVIRON.set(environ)
    try:
        return Settings()
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
    finally:
        SECRET_ENVIRON.reset(environ_token)
        PREPARED_INPUT.reset(token)
    # Raised outside the except block: the ValidationError (which prints input values,
    # possibly secrets) must not ride along as __context__ into tracebacks or logs.
    locator = Locator(path, tree, _env_paths(environ))
    raise ConfigError("\n".join(format_errors(errors, locator)))


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
