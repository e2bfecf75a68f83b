"""The README's main job (`offsetd dev demo`) on the session's stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetd.devstack.stack import Stack, StackInfo
from tests.integration.demo_checks import assert_healed

pytestmark = pytest.mark.integration


def test_demo_heals_the_sink_by_skipping_exactly_the_poison_record(
    stack: StackInfo, tmp_path: Path
) -> None:
    from offsetd.devstack.demo import run_demo

    local = Stack(Path(stack.run_dir))
    said: list[str] = []
    try:
        records = run_demo(local, tmp_path / "offsetd.yaml", said.append)
    finally:
        assert local.stop_extra("offsetd-run") == ["offsetd-run"]
    assert_healed(records, said)
