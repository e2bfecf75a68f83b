"""offsetd.cli.failures.reports_errors: one line and the error's exit code, and the error's frames
freed before the exit. Raised inside the `except` block, the exit carried the error (its
`__context__`) and, through its traceback, the frames' locals to the interpreter's very end: a
librdkafka client among them was destroyed during finalization and crashed the process (exit -11
after the right message, once in CI on a refused login)."""

from __future__ import annotations

import gc
import weakref

import pytest

from offsetd.cli.failures import reports_errors
from offsetd.errors import KafkaAuthFailed


class Client:
    """Stands for a librdkafka client held in a local of a failing call's frame."""


def test_an_error_exits_with_its_code_and_its_frames_freed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    held: list[weakref.ref[Client]] = []

    @reports_errors
    def command() -> None:
        client = Client()
        held.append(weakref.ref(client))
        raise KafkaAuthFailed("Kafka at b:9093 refused the login of user offsetd: bad password")

    gc.disable()  # only references may free it, as at a real exit
    try:
        with pytest.raises(SystemExit) as exited:
            command()
        assert exited.value.code == KafkaAuthFailed.exit_code
        assert exited.value.__context__ is None  # the exit carries no error, no traceback
        assert held[0]() is None  # the failing frame's client is gone before the exit
    finally:
        gc.enable()
    assert capsys.readouterr().err == (
        "error: Kafka at b:9093 refused the login of user offsetd: bad password\n"
    )
