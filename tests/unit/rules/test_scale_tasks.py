"""`scale-tasks` as a rule writes it: its targets, and its mistakes named by file, line and
field (the action itself runs on the real stack: tests/integration/test_scale_tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offsetd.rules.actions import ScaleTasks, effects_of
from tests.unit.rules.test_rules_loading import problems_of, write


@pytest.mark.parametrize(
    ("fields", "current", "wanted"),
    [
        ({"to": 4}, 1, 4),
        ({"to": 1}, 6, 1),
        ({"by": 2, "max": 8}, 3, 5),
        ({"by": 2, "max": 8}, 7, 8),  # bounded by max
        ({"by": 2, "max": 8}, 9, 8),  # already above: brought back within the bound
        ({"by": -1}, 3, 2),
        ({"by": -3, "min": 2}, 3, 2),  # bounded by min
    ],
)
def test_the_target(fields: dict[str, int], current: int, wanted: int) -> None:
    assert ScaleTasks.model_validate({"type": "scale-tasks", **fields}).target(current) == wanted


def test_it_writes_and_moves_no_offsets() -> None:
    effects = effects_of("scale-tasks")
    assert (effects.writes, effects.moves_offsets, effects.skips_record) == (True, False, False)


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ("{type: scale-tasks}", "actions[0]: give exactly one of to or by"),
        ("{type: scale-tasks, to: 2, by: 1, max: 3}", "actions[0]: give exactly one of to or by"),
        ("{type: scale-tasks, by: 1}", "actions[0].max: is required with a positive by"),
        ("{type: scale-tasks, by: 0}", "actions[0].by: must not be 0"),
        ("{type: scale-tasks, to: 0}", "actions[0].to: Input should be greater than or equal to 1"),
        (
            "{type: scale-tasks, by: -1, min: 4, max: 2}",
            "actions[0].max: must not be less than min",
        ),
        ("{type: scale-tasks, to: 2, tasks: 3}", "actions[0].tasks: unknown key"),
    ],
)
def test_mistakes_are_named(tmp_path: Path, action: str, problem: str) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        f"""\
        name: more-tasks
        match: {{kind: task_status, state: RUNNING}}
        actions:
          - {action}
        """,
    )
    [found] = problems_of(path)
    assert found.startswith(f"{path}:4: {problem}"), found
