"""clients.call_again: which Connect failures are asked again, and how often.

The errors are made the way the Connect client makes them (`error_for_status`): what is asked
again is decided by their typed mark, so these tests fail if the client marks them wrongly.
"""

import asyncio

import pytest

from offsetd.connect.client import error_for_status
from offsetd.errors import (
    ConnectBusy,
    ConnectorNotFound,
    ConnectorRejected,
    ConnectUnavailable,
    OffsetdError,
)
from offsetd.remediation.clients import call_again

URL = "http://c:8083"


class Script:
    """Raises the scripted errors in turn, then answers "done"; records calls and sleeps."""

    def __init__(self, *errors: OffsetdError) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.sleeps: list[float] = []

    async def call(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def run(self, delays: tuple[float, ...] = (1.0, 3.0)) -> str:
        return asyncio.run(call_again("read", self.call, delays, self.sleep))


@pytest.mark.parametrize(
    "error",
    [
        ConnectUnavailable("Connect at x did not answer (ReadTimeout)"),
        ConnectBusy("Connect kept refusing (409: ...)"),
        error_for_status(503, "down", "stop the connector", "s", URL),
        error_for_status(500, "Request timed out", "stop the connector", "s", URL),
        error_for_status(500, "Request timed out", "alter offsets", "s", URL),
    ],
)
def test_a_transient_failure_is_asked_again_after_a_pause(error: OffsetdError) -> None:
    script = Script(error)
    assert script.run() == "done"
    assert (script.calls, script.sleeps) == (2, [1.0])


def test_the_last_failure_is_raised_once_the_delays_are_spent() -> None:
    lost = [ConnectUnavailable(f"no answer {i}") for i in range(3)]
    script = Script(*lost)
    with pytest.raises(ConnectUnavailable, match="no answer 2"):
        script.run()
    assert (script.calls, script.sleeps) == (3, [1.0, 3.0])


@pytest.mark.parametrize(
    "error",
    [
        ConnectorNotFound("connector 's' does not exist on Connect at http://c:8083"),
        ConnectorRejected("Connect refused to stop the connector for s: bad request"),
        error_for_status(404, "not found", "stop the connector", "s", URL),
        error_for_status(500, "the connector refused", "alter offsets", "s", URL),
        error_for_status(400, "bad request", "stop the connector", "s", URL),
        OffsetdError("could not stop the connector for s: Connect answered 503: down"),
    ],
)
def test_an_answer_that_will_not_change_is_raised_at_once(error: OffsetdError) -> None:
    script = Script(error)
    with pytest.raises(type(error)):
        script.run()
    assert (script.calls, script.sleeps) == (1, [])


def test_no_delays_means_one_try() -> None:
    script = Script(ConnectUnavailable("no answer"))
    with pytest.raises(ConnectUnavailable):
        script.run(delays=())
    assert script.calls == 1
