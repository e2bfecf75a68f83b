"""Run `offsetd` in-process the way a person runs it, and read what it printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from offsetd.cli import main


def offsetd(config: Path, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, [*args[:2], "--config", str(config), *args[2:]], input=input)


def offsetd_json(config: Path, *args: str, input: str | None = None) -> Any:
    result = offsetd(config, *args, "--output", "json", input=input)
    assert result.exit_code == 0, result.output + result.stderr
    return json.loads(result.stdout)
