"""The shipped alert rules: promtool accepts and tests them (the Helm chart's PrometheusRule
is rendered from the same file: tests/integration/test_helm_chart.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROM = REPO / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is not installed: run scripts/bootstrap (Debian package prometheus)"
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=120, check=False, cwd=PROM
    )


def test_promtool_checks_the_rules() -> None:
    result = promtool("check", "rules", "offsetd-rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 17 rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    tests = sorted(str(p.relative_to(PROM)) for p in (PROM / "tests").glob("*.yml"))
    assert tests
    result = promtool("test", "rules", *tests)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("broken", ["for: 2m", "expr: offsetd_breaker_open == 1"])
def test_promtool_unit_tests_catch_a_changed_rule(broken: str, tmp_path: Path) -> None:
    """The unit tests can fail: change a rule and they must."""
    rules = (PROM / "offsetd-rules.yml").read_text()
    assert broken in rules
    changed = rules.replace(
        broken, "for: 30m" if broken.startswith("for") else "expr: vector(0) == 1"
    )
    (tmp_path / "offsetd-rules.yml").write_text(changed)
    (tmp_path / "tests").mkdir()
    for test in (PROM / "tests").glob("*.yml"):
        (tmp_path / "tests" / test.name).write_text(test.read_text())
    binary = shutil.which("promtool")
    assert binary
    result = subprocess.run(
        [binary, "test", "rules", *(f"tests/{p.name}" for p in (PROM / "tests").glob("*.yml"))],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode != 0, result.stdout
