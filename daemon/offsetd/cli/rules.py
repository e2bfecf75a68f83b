"""`offsetd rules ...`: the JSON Schema, validation and offline tests of remediation rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import click
from pydantic import ValidationError

from offsetd.events.failures import classify
from offsetd.rules.loading import RulesError, check_rule_files, load_rules, rule_files
from offsetd.rules.matching import explain as explain_event
from offsetd.rules.models import ConnectorMeta
from offsetd.rules.schema import rules_file_schema
from offsetd.ruletest import TestEvent, build_events, event_errors, format_result, run_test_file
from offsetd.yamlerrors import YamlFileError, format_errors, plain, read_yaml

__all__ = ["check", "explain", "rules", "schema", "test_"]


@click.group("rules")
def rules() -> None:
    """Remediation rules: schema, validation and offline tests."""


@rules.command()
def schema() -> None:
    """Print the JSON Schema of a rules file (for editors)."""
    click.echo(json.dumps(rules_file_schema(), indent=2))


@rules.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def check(path: Path) -> None:
    """Validate a rules folder (its *.yaml files) or one file; exit 1 listing every error."""
    files = rule_files(path) if path.is_dir() else [path]
    if not files:
        click.echo(f"{path}: no *.yaml or *.yml rule files", err=True)
        raise SystemExit(1)
    loaded, problems = check_rule_files(files)
    if problems:
        for problem in problems:
            click.echo(problem, err=True)
        raise SystemExit(1)
    count, nfiles = len(loaded), len(files)
    click.echo(f"ok: {count} rule{'s' * (count != 1)} in {nfiles} file{'s' * (nfiles != 1)}")


@rules.command("test")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
def test_(files: tuple[Path, ...]) -> None:
    """Run rule test files (like `promtool test rules`); exit 1 if any test fails."""
    failed = False
    for path in files:
        result = run_test_file(path)
        for line in format_result(result):
            click.echo(line)
        failed = failed or not result.ok
    if failed:
        raise SystemExit(1)


@rules.command()
@click.argument("rules_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("event_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--connector-class", default=None, help="The connector's class, if known.")
@click.option(
    "--connector-type", type=click.Choice(["sink", "source"]), default=None, help="sink or source."
)
def explain(
    rules_dir: Path, event_file: Path, connector_class: str | None, connector_type: str | None
) -> None:
    """Say why each rule matches an event or not.

    EVENT_FILE is YAML: one input event as written in rule tests (`at` may be omitted).
    """
    try:
        ruleset = load_rules(rules_dir)
        tree = read_yaml(event_file)
        data = plain(tree, event_file)
    except (RulesError, YamlFileError) as exc:
        _fail(exc.problems)
    if isinstance(data, dict):
        data.setdefault("at", "0s")
    try:
        spec = TestEvent.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        _fail(format_errors(errors, event_file, tree))
    try:
        event = next(build_events(spec, {})).event
    except ValidationError as exc:
        _fail(event_errors(exc.errors(include_url=False, include_input=False), event_file, tree))
    except ValueError as exc:
        _fail([f"{event_file}: {exc}"])
    meta = None
    if connector_class is not None or connector_type is not None:
        meta = ConnectorMeta(connector_class or "", connector_type or "")
    error = getattr(event, "error", None)
    if error is not None:
        found = classify(error)
        click.echo(f"failure class: {found.failure} ({found.because})")
    for line in explain_event(event, ruleset, meta):
        click.echo(line)


def _fail(problems: list[str]) -> NoReturn:
    for problem in problems:
        click.echo(problem, err=True)
    raise SystemExit(1)
