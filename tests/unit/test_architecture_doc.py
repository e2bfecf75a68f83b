"""ARCHITECTURE.md's layer table and the import-linter `layers` contract name the same packages.

`make lint` enforces the contract, so the code cannot drift from it; the table is what a person
reads, and nothing else keeps it true. These tests fail naming what one has and the other
lacks, and any top-level module of the package that neither places.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "daemon" / "offsetd"


def doc_layers() -> list[set[str]]:
    """The packages of each row of ARCHITECTURE.md's "Layers" table, top row first."""
    lines = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"^##\s+Layers\b", line))
    table: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            table.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif table:
            break  # the table has ended
    header, rows = table[0], table[2:]  # table[1] is the |---| line
    column = header.index("packages")
    return [set(re.findall(r"`([^`]+)`", row[column])) for row in rows]


def contract_layers() -> list[set[str]]:
    """The packages of each layer of pyproject.toml's `layers` contract, top layer first."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["id"] == "layers")["layers"]
    return [{name.strip() for name in layer.split("|")} for layer in layers]


def top_level_modules() -> set[str]:
    """Every module and package directly under daemon/offsetd/ (what `exhaustive` covers)."""
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    return modules | packages


def test_the_doc_table_is_found_and_names_packages() -> None:
    rows = doc_layers()
    assert len(rows) > 5
    assert all(rows), "a row of the Layers table names no package in backticks"


def test_the_doc_table_and_the_contract_name_the_same_packages() -> None:
    in_doc = set().union(*doc_layers())
    in_contract = set().union(*contract_layers())
    assert in_doc - in_contract == set(), "in ARCHITECTURE.md's Layers table, not in the contract"
    assert in_contract - in_doc == set(), "in the layers contract, not in ARCHITECTURE.md's table"


def test_every_top_level_module_is_in_the_doc_and_the_contract() -> None:
    modules = top_level_modules()
    assert modules - set().union(*doc_layers()) == set(), "not in ARCHITECTURE.md's Layers table"
    assert modules - set().union(*contract_layers()) == set(), "not in the layers contract"


def test_the_doc_draws_no_package_above_one_the_contract_puts_above_it() -> None:
    """A row may hold several layers of the contract (`a, then b`), never reverse two."""
    row_of = {name: row for row, names in enumerate(doc_layers()) for name in names}
    reversed_pairs = [
        f"{upper} (contract layer {i}) is drawn below {lower} (contract layer {j})"
        for i, uppers in enumerate(contract_layers())
        for j, lowers in enumerate(contract_layers())
        if i < j
        for upper in uppers
        for lower in lowers
        if upper in row_of and lower in row_of and row_of[upper] > row_of[lower]
    ]
    assert reversed_pairs == []
