"""The public surface, pinned: the CLI command tree, every module's exported names, the error tree.

A change to any of them is a change users and scripts see, so it must be deliberate: the test
fails with a diff, and `OFFSETD_WRITE_SURFACE=1 pytest tests/unit/surface`
writes the new pins for review in the same commit.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import os
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import click

import offsetd
from offsetd import errors
from offsetd.cli import main

PINS = Path(__file__).parent
# Importing these runs a program: they are entry points, not modules to import.
ENTRY_POINTS = {"offsetd.__main__"}


def _modules() -> list[ModuleType]:
    names = sorted(
        info.name
        for info in pkgutil.walk_packages(offsetd.__path__, prefix="offsetd.")
        if info.name not in ENTRY_POINTS
    )
    return [importlib.import_module(name) for name in ["offsetd", *names]]


def _check_pin(name: str, actual: str) -> None:
    pin = PINS / name
    if os.environ.get("OFFSETD_WRITE_SURFACE") == "1":
        pin.write_text(actual)
    expected = pin.read_text() if pin.is_file() else ""
    diff = "\n".join(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "pinned", "now", lineterm=""
        )
    )
    assert actual == expected, f"{pin.name} changed (re-pin if deliberate):\n{diff}"


def _tree(command: click.Command, path: str) -> list[str]:
    options = sorted(opt for param in command.params for opt in param.opts if opt.startswith("-"))
    arguments = [param.name or "" for param in command.params if isinstance(param, click.Argument)]
    line = " ".join([path, *(a.upper() for a in arguments), *options])
    lines = [line]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, (path, name)
            assert sub.name == name, (path, name)
            lines += _tree(sub, f"{path} {name}")
    return lines


def test_the_cli_command_tree_is_pinned() -> None:
    _check_pin("cli_tree.txt", "\n".join(_tree(main, "offsetd")) + "\n")


def test_every_module_declares_what_it_exports() -> None:
    missing = [m.__name__ for m in _modules() if not hasattr(m, "__all__")]
    assert missing == [], f"modules without __all__: {missing}"
    unknown = {
        m.__name__: [n for n in m.__all__ if not hasattr(m, n)]
        for m in _modules()
        if any(not hasattr(m, n) for n in m.__all__)
    }
    assert unknown == {}, f"__all__ names a module does not have: {unknown}"


def test_the_exported_names_are_pinned() -> None:
    exported = {m.__name__: sorted(m.__all__) for m in _modules() if hasattr(m, "__all__")}
    _check_pin("exports.json", json.dumps(exported, indent=1, sort_keys=True) + "\n")


def _error_classes() -> set[type[errors.OffsetdError]]:
    _modules()  # every error class is defined at import time
    found: set[type[errors.OffsetdError]] = set()
    todo: list[type[errors.OffsetdError]] = [errors.OffsetdError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("offsetd.") and cls not in found:
            found.add(cls)
            todo.extend(cls.__subclasses__())
    return found


def test_every_error_stands_in_the_error_tree_with_its_exit_code() -> None:
    tree = inspect.getdoc(errors) or ""
    missing = []
    for cls in sorted(_error_classes(), key=lambda c: c.__name__):
        line = re.search(rf"\b{cls.__name__}\b\s+exit (\d+)", tree)
        if line is None or int(line.group(1)) != cls.exit_code:
            missing.append(f"{cls.__name__} (exit {cls.exit_code}, {cls.__module__})")
    assert missing == [], "not in errors.py's tree with their exit code: " + ", ".join(missing)


# Codes deliberately shared: the same situation reached by another path (the tree says so).
SHARED_CODES = {13: ["ChangeIncomplete", "OfflineWriteIncomplete"]}


def test_exit_codes_tell_situations_apart() -> None:
    """A code is new only once; a subclass keeps its parent's, or SHARED_CODES says why not."""
    by_code: dict[int, list[str]] = {}
    for cls in _error_classes():
        parent = cls.__mro__[1]
        if cls is errors.OffsetdError or cls.exit_code != getattr(parent, "exit_code", None):
            by_code.setdefault(cls.exit_code, []).append(cls.__name__)
    shared = {code: sorted(names) for code, names in by_code.items() if len(names) > 1}
    assert shared == SHARED_CODES
