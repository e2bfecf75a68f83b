"""The one-record override (`consumer.override.max.poll.records`) and putting it back.

Locating by one-record batches changes one key of a connector's config; this module owns that
key: its default, reading it, and restoring it after locating or after a crash
(`offsetd.remediation.recovery`). Restoring retries through `offsetd.retry`, by the errors'
typed marks.
"""

from __future__ import annotations

from collections.abc import Mapping

from offsetd.connect.client import ConnectClient
from offsetd.errors import ConnectBusy, ConnectUnavailable
from offsetd.remediation.locate.model import ConfigNotRestored
from offsetd.retry import retry_call

__all__ = [
    "DEFAULT_MAX_POLL_RECORDS",
    "MAX_POLL_RECORDS_KEY",
    "max_poll_records",
    "restore_override",
]

MAX_POLL_RECORDS_KEY = "consumer.override.max.poll.records"
DEFAULT_MAX_POLL_RECORDS = 500  # the Java consumer's default: the largest batch a poll returns


async def restore_override(
    client: ConnectClient, name: str, original: str | None, *, attempts: int = 3
) -> dict[str, str]:
    """Put `consumer.override.max.poll.records` back to `original` (None: remove it).

    Only that key is changed, on top of the config as it is now, so a change someone made in
    between is kept; when nobody did, this restores the original config exactly. Verified by
    reading the config back; returns it. Up to `attempts` tries while Connect does not answer,
    is busy, or reads back another config (`offsetd.retry`, 0.5 s then 1 s, ... apart). Raises
    ConfigNotRestored, naming the connector and the key (never a config value, which may hold
    secrets), if it cannot be done.
    """

    async def once() -> dict[str, str]:
        current = await client.config(name)
        target = dict(current)
        if original is None:
            target.pop(MAX_POLL_RECORDS_KEY, None)
        else:
            target[MAX_POLL_RECORDS_KEY] = original
        if target == current:
            return current
        await client.put_config(name, target)
        after = await client.config(name)
        if after != target:
            raise ConfigNotRestored(
                "the config read back differs from the one written", retriable=True
            )
        return after

    try:
        return await retry_call(once, (0.5 * n for n in range(1, attempts)))
    except (ConnectUnavailable, ConnectBusy, ConfigNotRestored) as exc:
        raise ConfigNotRestored(
            f"{name} may still have {MAX_POLL_RECORDS_KEY}=1 from locating a poison record; "
            f"set it back to {'its original value' if original is not None else 'unset'} ({exc})"
        ) from None


def max_poll_records(config: Mapping[str, str]) -> int:
    """The largest batch one poll of the connector's consumer returns."""
    try:
        return max(1, int(config.get(MAX_POLL_RECORDS_KEY, DEFAULT_MAX_POLL_RECORDS)))
    except ValueError:
        return DEFAULT_MAX_POLL_RECORDS
