"""A run of poison records is one incident: when to skip the next one, and when to stop.

After a skip, a sink that fails again at a *later* record has met a new poison record: the skip
helped (the failure moved). A producer that wrote a few bad records in a row (one bad deploy)
makes exactly that, one record after another. The skip action then locates the next record and
skips it too, each located exactly and quarantined once, until the sink stays RUNNING — within
limits this module decides, purely, from what was skipped and where the sink failed now:

- the failure did not move (the same record, or one before it): the skip did not help — breaker;
- more than `remediation.max_poison_run` records in the run: not a few bad records but a change
  upstream — breaker, "a run of N bad records at ...";
- no record was ever shown to pass with the connector's current configuration (nothing delivered
  since its configuration changed, nothing delivered while locating): every record fails, most
  likely a converter or setting wrong for the topic — breaker after the first record only (it
  stays in quarantine, recoverable), "every record fails: likely configuration";
- the failure cannot be located: nothing proves it moved — breaker, as before runs existed.

Pure: no I/O, the caller reads and acts (`offsetd.remediation.actions.skip`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["BreakerCause", "PoisonRun", "RunStep", "where"]

BreakerCause = Literal["did_not_move", "run_too_long", "every_record_fails", "not_located"]
Coordinates = tuple[str, int, int]  # topic, partition, offset


def where(records: list[Coordinates]) -> str:
    """`t-0@30..32` for consecutive offsets of one partition, else each record listed."""
    if not records:
        return "no record"
    topics = {(t, p) for t, p, _o in records}
    offsets = sorted(o for _t, _p, o in records)
    if len(topics) == 1 and offsets == list(range(offsets[0], offsets[0] + len(offsets))):
        topic, partition = next(iter(topics))
        if len(offsets) == 1:
            return f"{topic}-{partition}@{offsets[0]}"
        return f"{topic}-{partition}@{offsets[0]}..{offsets[-1]}"
    return ", ".join(f"{t}-{p}@{o}" for t, p, o in records)


@dataclass(frozen=True)
class RunStep:
    """What to do about the next failure: skip `record`, or stop (with the breaker's cause)."""

    skip: Coordinates | None
    cause: BreakerCause | None
    message: str


@dataclass
class PoisonRun:
    """The records one incident skipped, in order, and what proves the configuration works."""

    connector: str
    max_records: int
    proof: str | None  # why the connector's configuration is known to pass records; None: no proof
    no_proof: str = ""
    skipped: list[Coordinates] = field(default_factory=list)

    def skipped_one(self, record: Coordinates) -> None:
        self.skipped.append(record)

    def proven_by(self, why: str) -> None:
        if self.proof is None:
            self.proof = why

    def next_step(self, failed_at: Coordinates | None, not_located: str = "") -> RunStep:
        """The sink failed again after the last skip, at `failed_at` (None: not located, for
        the reason `not_located`)."""
        done = where(self.skipped)
        if failed_at is None:
            return RunStep(
                None,
                "not_located",
                f"{self.connector} failed again after the skip of {done}, and the new failure "
                f"could not be located ({not_located}): nothing proves the skip helped",
            )
        topic, partition, offset = failed_at
        passed = [o for t, p, o in self.skipped if (t, p) == (topic, partition)]
        if passed and offset <= max(passed):
            return RunStep(
                None,
                "did_not_move",
                f"the skip did not help: the failure did not move ({self.connector} failed "
                f"again at {topic}-{partition}@{offset} after the skip of {done})",
            )
        if len(self.skipped) >= self.max_records:
            return RunStep(
                None,
                "run_too_long",
                f"a run of more than {self.max_records} bad records at {done} and "
                f"{topic}-{partition}@{offset} (remediation.max_poison_run): more records "
                "keep failing; likely a change upstream — left for a person",
            )
        if self.proof is None:
            return RunStep(
                None,
                "every_record_fails",
                f"every record fails: likely configuration (a converter or setting wrong for "
                f"the topic's records): {done} was skipped and kept in quarantine, and "
                f"{topic}-{partition}@{offset} fails too, while no record is known to have "
                f"passed with {self.connector}'s current configuration ({self.no_proof})",
            )
        return RunStep(
            failed_at, None, f"{topic}-{partition}@{offset} is the next bad record of the run"
        )

    def summary(self, verify_s: float) -> str:
        """The outcome's sentence once the sink stays RUNNING after the run."""
        done = where(self.skipped)
        count = len(self.skipped)
        return (
            f"skipped a run of {count} bad records at {done} in {self.connector}: each "
            f"quarantined, the offset set past the last one, RUNNING for {verify_s:g} s"
        )
