"""When a run of poison records is skipped record by record, and when it stops (pure)."""

from __future__ import annotations

import pytest

from offsetd.remediation.poison_run import PoisonRun, where


def run(proof: str | None = "records were delivered", max_records: int = 5) -> PoisonRun:
    return PoisonRun("orders-sink", max_records, proof, "nothing was ever committed on t-0")


def test_a_failure_at_the_next_record_is_the_next_bad_record() -> None:
    r = run()
    r.skipped_one(("t", 0, 30))
    step = r.next_step(("t", 0, 31))
    assert step.skip == ("t", 0, 31)
    assert step.cause is None


@pytest.mark.parametrize("offset", [30, 29, 0])
def test_a_failure_that_did_not_move_stops_the_run(offset: int) -> None:
    r = run()
    r.skipped_one(("t", 0, 30))
    step = r.next_step(("t", 0, offset))
    assert step.skip is None
    assert step.cause == "did_not_move"
    assert f"the failure did not move (orders-sink failed again at t-0@{offset}" in step.message


def test_another_partition_moved_on() -> None:
    r = run()
    r.skipped_one(("t", 0, 30))
    assert r.next_step(("t", 1, 2)).skip == ("t", 1, 2)


def test_the_run_is_bounded() -> None:
    r = run(max_records=3)
    for offset in (30, 31, 32):
        r.skipped_one(("t", 0, offset))
    step = r.next_step(("t", 0, 33))
    assert step.cause == "run_too_long"
    assert step.message.startswith("a run of more than 3 bad records at t-0@30..32 and t-0@33")


def test_without_proof_that_any_record_passes_only_the_first_is_skipped() -> None:
    r = run(proof=None)
    r.skipped_one(("t", 0, 0))
    step = r.next_step(("t", 0, 1))
    assert step.cause == "every_record_fails"
    assert step.message.startswith("every record fails: likely configuration")
    assert "t-0@0 was skipped and kept in quarantine" in step.message
    assert "nothing was ever committed on t-0" in step.message
    r.proven_by("3 records were delivered between the bad ones")
    assert r.next_step(("t", 0, 1)).skip == ("t", 0, 1)


def test_a_failure_that_cannot_be_located_proves_nothing() -> None:
    r = run()
    r.skipped_one(("t", 0, 30))
    step = r.next_step(None, "failure_did_not_repeat: ...")
    assert step.cause == "not_located"
    assert "could not be located (failure_did_not_repeat: ...)" in step.message


def test_where_names_a_run_or_each_record() -> None:
    assert where([("t", 0, 30)]) == "t-0@30"
    assert where([("t", 0, 30), ("t", 0, 31), ("t", 0, 32)]) == "t-0@30..32"
    assert where([("t", 0, 30), ("t", 0, 35)]) == "t-0@30, t-0@35"
    assert where([("t", 0, 30), ("u", 1, 31)]) == "t-0@30, u-1@31"
    r = run()
    r.skipped_one(("t", 0, 30))
    r.skipped_one(("t", 0, 31))
    assert r.summary(120) == (
        "skipped a run of 2 bad records at t-0@30..31 in orders-sink: each quarantined, the "
        "offset set past the last one, RUNNING for 120 s"
    )
