"""The skip's locator reads its parameters from the typed spec, and the one-record override is
put back through `offsetd.retry` (`offsetd.remediation.locate.override`)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from offsetd.engine import Decision, PlannedAction
from offsetd.errors import ConnectAccessDenied, ConnectBusy
from offsetd.recordchecks import TooLarge
from offsetd.remediation.locate import MAX_POLL_RECORDS_KEY, ConfigNotRestored, restore_override
from offsetd.remediation.skip_locator import skip_spec


def test_the_skip_parameters_come_typed_from_its_spec() -> None:
    decision = _decision(
        (
            PlannedAction(type="notify", params={}),
            PlannedAction(
                type="skip-record",
                params={
                    "check": {"kind": "too_large", "max_bytes": 10},
                    "single_record_batches": False,
                },
            ),
        )
    )
    spec = skip_spec(decision)
    assert spec is not None
    assert isinstance(spec.check, TooLarge)
    assert spec.check.max_bytes == 10
    assert spec.single_record_batches is False


def test_a_skip_without_parameters_has_the_rule_defaults_and_no_skip_has_no_spec() -> None:
    spec = skip_spec(_decision((PlannedAction(type="skip-record", params={}),)))
    assert spec is not None
    assert spec.check is None
    assert spec.single_record_batches is True
    assert skip_spec(_decision((PlannedAction(type="notify", params={}),))) is None


def _decision(actions: tuple[PlannedAction, ...]) -> Decision:
    """A decision as far as the locator reads it for its parameters: its actions."""
    return cast(Decision, SimpleNamespace(actions=actions))


class _Connect:
    """A connector's config in Connect, failing as told."""

    def __init__(self, config: dict[str, str], fail: list[Exception], *, drift: bool = False):
        self.config_now = dict(config)
        self.fail = fail
        self.drift = drift
        self.reads = 0

    async def config(self, name: str) -> dict[str, str]:
        self.reads += 1
        if self.fail:
            raise self.fail.pop(0)
        return dict(self.config_now)

    async def put_config(self, name: str, config: dict[str, str]) -> None:
        # drift: Connect answers, but the config it reads back is not the one written
        self.config_now = {**config, MAX_POLL_RECORDS_KEY: "1"} if self.drift else dict(config)


def test_restoring_the_override_retries_a_busy_connect() -> None:
    connect = _Connect({"a": "1", MAX_POLL_RECORDS_KEY: "1"}, [ConnectBusy("rebalancing")])
    restored = asyncio.run(restore_override(cast(Any, connect), "sink", None))
    assert restored == {"a": "1"}
    assert connect.config_now == {"a": "1"}


def test_a_config_that_never_reads_back_is_not_restored_after_the_attempts() -> None:
    connect = _Connect({MAX_POLL_RECORDS_KEY: "1"}, [], drift=True)
    with pytest.raises(ConfigNotRestored, match=f"may still have {MAX_POLL_RECORDS_KEY}=1"):
        asyncio.run(restore_override(cast(Any, connect), "sink", "500", attempts=2))
    assert connect.reads == 4  # two attempts, each reading before and after writing


def test_access_denied_is_not_asked_again_but_still_says_the_config_was_not_restored() -> None:
    connect = _Connect({MAX_POLL_RECORDS_KEY: "1"}, [ConnectAccessDenied("403")])
    with pytest.raises(ConfigNotRestored, match="set it back to unset"):
        asyncio.run(restore_override(cast(Any, connect), "sink", None))
    assert connect.reads == 1
