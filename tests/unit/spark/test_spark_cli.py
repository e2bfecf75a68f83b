"""`offsetd rewind plan`: usage errors caught before anything is resolved or started."""

from __future__ import annotations

from click.testing import CliRunner

from offsetd.cli import main

BASE = ["rewind", "plan", "--connect-url", "http://127.0.0.1:9", "--connector", "c"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [*BASE, "--predicate", "offset > 1", *args])
    return result.exit_code, result.output + result.stderr


def test_skip_run_takes_no_from_timestamp() -> None:
    code, out = _run("--mode", "skip-run", "--from-timestamp", "0", "--out", "p.json")
    assert code == 2
    assert "skip-run starts at the committed offset" in out


def test_timestamps_are_checked_and_named() -> None:
    code, out = _run("--from-timestamp", "2026-11-21T14:02", "--out", "p.json")
    assert code == 2
    assert "--from-timestamp '2026-11-21T14:02' has no time zone" in out
    code, out = _run("--from-timestamp", "2000", "--to-timestamp", "1000", "--out", "p.json")
    assert code == 2
    assert "--to-timestamp must be after --from-timestamp" in out


def test_unknown_mode_is_refused() -> None:
    code, out = _run("--mode", "last-match", "--out", "p.json")
    assert code == 2
    assert "first-match" in out


def test_help_documents_columns_modes_and_the_apply_step() -> None:
    result = CliRunner().invoke(main, ["rewind", "plan", "--help"])
    assert result.exit_code == 0
    for text in ("value_corrupt", "after-last-match", "skip-run", "offsets import --dry-run"):
        assert text in result.output
