"""What `offsetd dev demo` must have done, checked the same way on the plaintext and the secure
stack: exactly the poison record skipped, once, by the saga, quarantined, the sink delivering."""

from __future__ import annotations

from typing import Any

from offsetd.cli.history import incidents


def assert_healed(records: list[dict[str, Any]], said: list[str]) -> None:
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
    # `offsetd history`: one row per action taken (before the tallies: eight rows)
    found = incidents(records)
    assert all(i.decision is not None for i in found), [i.head for i in found]
    skip_rows = [i for i in found if i.head["rule"] == "poison-record-skip"]
    assert [i.outcome for i in skip_rows] == ["executed"], skip_rows
