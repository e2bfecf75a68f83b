"""Decisions waiting for an operator's approval, and the loop that hands them on once decided.

The approval itself lives in the control topic (`offsetd approve` / `reject` from any shell);
only the decision is in this process's memory, so after a restart the executor fills it again
from the audit (`offsetd.remediation.recovery`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from offsetd.engine import Decision
from offsetd.errors import OffsetdError
from offsetd.remediation.control import ControlStore

__all__ = ["ApprovalWatch", "PauseWatch"]

log = logging.getLogger("offsetd.remediation")


class ApprovalWatch:
    def __init__(self) -> None:
        self.waiting: dict[str, Decision] = {}

    def wait_for(self, decision: Decision) -> None:
        self.waiting[decision.id] = decision

    def wait_again(self, decision: Decision) -> None:
        """A decision an earlier life of the daemon was waiting for (kept if already here)."""
        self.waiting.setdefault(decision.id, decision)

    async def run(
        self,
        control: ControlStore,
        poll_s: Callable[[], float],
        decided: Callable[[Decision], None],
    ) -> None:
        """Every `poll_s()`: hand each decision whose approval was given or refused to
        `decided` (its handling again, on purpose: the answer is the new input)."""
        while True:
            await asyncio.sleep(poll_s())
            try:
                state = await control.acatch_up()
            except OffsetdError as exc:
                log.warning("could not read approvals: %s", exc)
                continue
            for decision_id in list(self.waiting):
                approval = state.approval(decision_id)
                if approval is None or approval.status == "pending":
                    continue
                decision = self.waiting.pop(decision_id, None)
                if decision is not None:
                    log.info("decision %s was %s; handling it", decision_id, approval.status)
                    decided(decision)


class PauseWatch:
    """Writing decisions the global pause held, handed back once `offsetd resume-automation`
    lifts it: a poison record that arrived during a pause is still acted on afterwards, if it
    still holds (the executor checks that before acting).

    Kept in memory: a daemon restarted during a pause forgets what it held, and the failures
    that still hold are decided again from the events after the resume."""

    def __init__(self) -> None:
        self.held: dict[str, Decision] = {}

    def hold(self, decision: Decision) -> None:
        self.held[decision.id] = decision

    async def run(
        self,
        control: ControlStore,
        poll_s: Callable[[], float],
        resumed: Callable[[Decision], None],
    ) -> None:
        """Every `poll_s()`: once automation is not paused, hand each held decision to
        `resumed`, oldest first."""
        while True:
            await asyncio.sleep(poll_s())
            if not self.held:
                continue
            try:
                state = await control.acatch_up()
            except OffsetdError as exc:
                log.warning("could not read the pause: %s", exc)
                continue
            if state.paused is not None:
                continue
            held = sorted(self.held.values(), key=lambda d: d.event_time_ms)
            self.held.clear()
            for decision in held:
                log.info("automation resumed; handling decision %s again", decision.id)
                resumed(decision)
