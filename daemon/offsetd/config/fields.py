"""The field types every config section shares: validated names, URLs, servers, properties.

Messages never quote input values in general (they may be secrets), only plain fields such as
topic names and aliases. `is_secret_property` says which client property values to redact.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    SecretStr,
    StringConstraints,
)

__all__ = [
    "REDACTED",
    "SECRET_ENVIRON",
    "Alias",
    "BootstrapServers",
    "ClientProperties",
    "ConfigModel",
    "HttpUrl",
    "NonEmptyStr",
    "Secret",
    "TopicName",
    "is_secret_property",
    "none_to_empty",
    "paired",
    "upper",
]

REDACTED = "**********"  # what SecretStr shows; used for secret client properties too

_SECRET_PROPERTY_WORDS = ("password", "secret", "token", "key")
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_ALIAS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def is_secret_property(name: str) -> bool:
    """Whether a client property's value must be redacted (its key looks like a secret)."""
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_PROPERTY_WORDS)


# -- field types --------------------------------------------------------------------------------


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


def upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _scalar_to_str(value: Any) -> Any:
    # librdkafka takes strings; let YAML authors write `linger.ms: 5` or `enable.idempotence: true`.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


# The environment `{env: NAME}` reads: `load_settings`'s own (os.environ unless a test gives one).
SECRET_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar(
    "offsetd_secret_environ", default=None
)


def _secret_source(value: Any) -> Any:
    """A secret written as `{file: /path}` (a mounted Kubernetes Secret key, read once at load;
    one trailing newline dropped) or `{env: NAME}` (any variable, e.g. from `secretKeyRef`).

    Errors name the file or the variable, never any part of the value.
    """
    if not isinstance(value, dict) or set(value) not in ({"file"}, {"env"}):
        return value
    if "file" in value:
        where = Path(str(value["file"]))
        try:
            text = where.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ValueError(f"secret file {where} does not exist") from None
        except UnicodeDecodeError:
            raise ValueError(f"secret file {where} is not UTF-8 text") from None
        except OSError as exc:
            raise ValueError(f"cannot read secret file {where}: {exc.strerror}") from None
        text = text.removesuffix("\n").removesuffix("\r")
        if not text:
            raise ValueError(f"secret file {where} is empty")
        return text
    name = str(value["env"])
    environ = SECRET_ENVIRON.get()
    found = (os.environ if environ is None else environ).get(name)
    if not found:
        raise ValueError(f"environment variable {name} (named by this secret) is not set")
    return found


def none_to_empty(factory: Callable[[], object]) -> BeforeValidator:
    # `dlq_topics:` with every entry commented out is YAML null; treat it as empty.
    return BeforeValidator(lambda value: factory() if value is None else value)


TopicName = Annotated[str, AfterValidator(_check_topic)]
Alias = Annotated[str, AfterValidator(_check_alias)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
BootstrapServers = Annotated[str, AfterValidator(_check_bootstrap)]
HttpUrl = Annotated[str, AfterValidator(_check_url)]
# A password, a key's password, a webhook URL with a token: inline, `{file: ...}` or `{env: ...}`.
Secret = Annotated[SecretStr, BeforeValidator(_secret_source)]
ClientProperties = Annotated[
    dict[
        NonEmptyStr,
        Annotated[str, BeforeValidator(_scalar_to_str), BeforeValidator(_secret_source)],
    ],
    none_to_empty(dict),
]


class ConfigModel(BaseModel):
    """Base of every config section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def paired(
    first: tuple[str, object | None], second: tuple[str, object | None]
) -> list[tuple[tuple[str | int, ...], str]]:
    (name_a, a), (name_b, b) = first, second
    if (a is None) == (b is None):
        return []
    missing = name_b if b is None else name_a
    return [((missing,), f"required when {name_a if b is None else name_b} is set")]
