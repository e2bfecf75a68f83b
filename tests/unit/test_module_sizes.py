"""Rooms of one concern: no module of offsetd or its benchmarks over 500 lines without its reason
("Why one module ...") in its docstring, and none in `remediation/` over 400 at all — a long
module is either one concern that must be read whole (say why) or several (split it).

Test modules are not held to this: a test module is one lane unit of the suite (scheduled whole,
tests/README.md), as long as the behaviours it proves on one set-up."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "daemon" / "offsetd"


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_long_modules_say_why() -> None:
    unexplained = []
    for path in sorted([*PACKAGE.rglob("*.py"), *(ROOT / "bench").rglob("*.py")]):
        if _lines(path) <= 500:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if "Why one module" not in doc:
            unexplained.append(f"{path.relative_to(ROOT)} ({_lines(path)} lines)")
    assert not unexplained, unexplained


def test_remediation_rooms_are_small() -> None:
    big = [
        f"{path.relative_to(ROOT)} ({_lines(path)} lines)"
        for path in sorted((PACKAGE / "remediation").rglob("*.py"))
        if _lines(path) > 400
    ]
    assert not big, big
