"""The README's main job (`offsetd dev demo`) on the session's stack."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetd.devstack.stack import Stack, StackInfo

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
    poison = next(line for line in said if "poison record at" in line)
    where = poison.split("poison record at ")[1].split(" ")[0]
    decisions = [r for r in records if r["rule"] == "poison-record-skip" and "kind" not in r]
    assert len(decisions) == 1
    record = decisions[0]["record"]
    assert f"{record['topic']}-{record['partition']}@{record['offset']}" == where
    assert decisions[0]["mode"] == "enforce"
    executed = [
        r
        for r in records
        if r.get("kind") == "remediation"
        and r["rule"] == "poison-record-skip"
        and r["outcome"] == "executed"
    ]
    assert len(executed) == 1, executed
    assert executed[0]["saga_status"] == "done"
    assert executed[0]["quarantine"] is not None
    methods = [c["method"] for c in executed[0]["http_calls"]]
    assert "PATCH" in methods
    assert any(line.startswith(f"quarantined: {where} -> ") for line in said), said
    assert any("delivered every record after the poison" in line for line in said)
