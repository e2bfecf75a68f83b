"""The README's main job (`offsetd dev demo`) on the session's stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetd.devstack.stack import Stack, StackInfo

pytestmark = pytest.mark.integration


def test_demo_shows_an_observe_mode_skip_of_exactly_the_poison_record(
    stack: StackInfo, tmp_path: Path
) -> None:
    from offsetd.devstack.demo import run_demo

    local = Stack(Path(stack.run_dir))
    said: list[str] = []
    try:
        records = run_demo(local, tmp_path / "offsetd.yaml", said.append)
    finally:
        assert local.stop_extra("offsetd-run") == ["offsetd-run"]
    skips = [r for r in records if r["rule"] == "poison-record-skip"]
    assert len(skips) == 1
    poison = next(line for line in said if "poison record at" in line)
    where = poison.split("poison record at ")[1].split(" ")[0]
    record = skips[0]["record"]
    assert f"{record['topic']}-{record['partition']}@{record['offset']}" == where
    assert skips[0]["mode"] == "observe"
    assert {r["mode"] for r in records} == {"observe"}
    assert any(r["rule"] == "poison-record-restart" and r["outcome"] == "planned" for r in records)
