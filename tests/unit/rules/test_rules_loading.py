"""offsetd.rules.loading and `offsetd rules check|schema`: errors name file, line and field."""

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offsetd.cli import main
from offsetd.rules import RulesError, load_rule_files, load_rules, rules_file_schema
from offsetd.rules.loading import check_rule_files

EXAMPLES = Path(__file__).resolve().parents[3] / "rules" / "examples"

GOOD = """\
- name: restart-on-timeout
  match:
    kind: task_status
    state: FAILED
    root_cause_class: java.net.SocketTimeoutException
  actions:
    - type: restart-failed-tasks
- name: skip-poison
  match: {kind: dlq_record}
  when: {count: 3, within: 10m, key: [connector, record]}
  actions: [{type: skip-record}]
  inhibits: {rules: restart-on-timeout}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def problems_of(*paths: Path) -> list[str]:
    _, problems = check_rule_files(list(paths))
    return problems


def test_a_folder_of_files_one_rule_or_a_list(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", GOOD)
    write(
        tmp_path,
        "b.yml",
        """\
        name: single
        match: {kind: connector_status}
        actions: [{type: notify}]
        """,
    )
    write(tmp_path, "c.yaml", "# all rules here are commented out\n")
    write(tmp_path, "notes.txt", "not a rule file")
    (tmp_path / "tests").mkdir()
    write(tmp_path / "tests", "t.yaml", "rule_files: [x]\n")  # subfolders are not read
    rules = load_rules(tmp_path)
    assert rules.names == ["restart-on-timeout", "skip-poison", "single"]


def test_unknown_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match:
          kind: task_status
          colour: red
        actions: [{type: notify}]
        """,
    )
    assert problems_of(path) == [f"{path}:4: match.colour: unknown key"]


def test_wrong_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        - name: fine
          match: {kind: task_status}
          actions: [{type: notify}]
        - name: r
          match: {kind: task_status}
          when:
            count: three
          actions: [{type: notify}]
        """,
    )
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:7: [1].when.count: Input should be a valid integer")


def test_invalid_regex(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match:
          kind: task_status
          connector:
            - orders-*
            - regex: "orders-(eu|us"
          message: "[unclosed"
        actions: [{type: notify}]
        """,
    )
    assert problems_of(path) == [
        f"{path}:6: match.connector[1].regex: invalid regex: missing ): orders-(eu|us",
        f"{path}:7: match.message[0]: invalid regex: missing ]: [unclosed",
    ]


def test_invalid_duration(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match: {kind: task_status}
        actions:
          - type: restart-failed-tasks
            backoff:
              initial: 30 seconds
        limits:
          cooldown: 2
        """,
    )
    assert problems_of(path) == [
        f"{path}:6: actions[0].backoff.initial: invalid duration '30 seconds': use a number "
        "and a unit, e.g. 30s, 10m, 1h30m (units ms, s, m, h, d)",
        f"{path}:8: limits.cooldown: must be a duration string such as 30s, 10m, 1h30m "
        "(units ms, s, m, h, d)",
    ]


def test_duplicate_rule_name_across_files(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", GOOD)
    b = write(
        tmp_path,
        "b.yaml",
        """\
        # the same name again
        - name: other
          match: {kind: task_status}
          actions: [{type: notify}]
        - name: skip-poison
          match: {kind: task_status}
          actions: [{type: notify}]
        """,
    )
    assert problems_of(a, b) == [
        f"{b}:5: [1].name: duplicate rule name 'skip-poison' (first defined at {a}:8)"
    ]


def test_yaml_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", "name: r\nmatch: {kind: task_status\nactions: []\n")
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:3: invalid YAML: ")


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    path = write(tmp_path, "r.yaml", "name: r\nname: s\nmatch: {kind: task_status}\n")
    assert problems_of(path) == [f"{path}:2: invalid YAML: duplicate key"]


def test_unknown_action_type_and_field_inside_an_action(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match: {kind: task_status}
        actions:
          - type: reboot
          - type: notify
            severity: loud
        """,
    )
    problems = problems_of(path)
    assert problems[0].startswith(f"{path}:4: actions[0].type: unknown value 'reboot'; expected")
    assert problems[1].startswith(f"{path}:6: actions[1].severity: Input should be 'info'")


def test_inhibiting_an_unknown_rule(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match: {kind: task_status}
        actions: [{type: notify}]
        inhibits:
          rules:
            - nope
        """,
    )
    assert problems_of(path) == [f"{path}:6: inhibits.rules[0]: no rule named 'nope'"]


def test_validator_problems_point_at_the_field(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match:
          kind: [task_status, dlq_record]
          state: FAILED
        actions: [{type: notify}]
        """,
    )
    [problem] = problems_of(path)
    assert problem.startswith(f"{path}:4: match.state: does not apply to dlq_record events")


def test_top_level_shapes(tmp_path: Path) -> None:
    scalar = write(tmp_path, "a.yaml", "just text\n")
    items = write(tmp_path, "b.yaml", "- 1\n")
    dates = write(
        tmp_path, "c.yaml", "name: r\ndescription: 2024-01-01\nmatch: {kind: task_status}\n"
    )
    assert problems_of(scalar, items, dates) == [
        f"{scalar}:1: the file must hold one rule (a mapping) or a list of rules",
        f"{items}:1: [0]: a rule must be a mapping",
        f"{dates}:2: description: unsupported YAML value of type date (quote it to make "
        "it a string)",
    ]


def test_load_raises_with_every_problem(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: a\nmatch: {kind: nope}\nactions: [{type: notify}]\n")
    write(tmp_path, "b.yaml", "name: b\nmatch: {kind: task_status}\n")
    with pytest.raises(RulesError) as info:
        load_rules(tmp_path)
    assert len(info.value.problems) == 2
    assert info.value.exit_code == 1
    with pytest.raises(RulesError, match="not a folder"):
        load_rules(tmp_path / "a.yaml")
    with pytest.raises(RulesError, match="no such file"):
        load_rule_files([tmp_path / "missing.yaml"])


# -- the CLI ------------------------------------------------------------------------------------


def test_cli_check_rules_examples() -> None:
    """CI: every shipped example rule is valid."""
    result = CliRunner().invoke(main, ["rules", "check", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok: ")


def test_cli_check_reports_every_error_one_per_line(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: a\nmatch: {kind: task_status, colour: red}\nactions: []\n")
    write(tmp_path, "b.yaml", "name: b\nmatch: {kind: task_status\n")
    result = CliRunner().invoke(main, ["rules", "check", str(tmp_path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        f"{tmp_path}/a.yaml:2: match.colour: unknown key",
        f"{tmp_path}/a.yaml:3: actions: List should have at least 1 item after validation, not 0",
        f"{tmp_path}/b.yaml:3: invalid YAML: expected ',' or '}}', but got '<stream end>'",
    ]


def test_cli_check_an_empty_folder_fails(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["rules", "check", str(tmp_path)])
    assert result.exit_code == 1
    assert "no *.yaml" in result.output


def test_cli_schema_is_json_schema() -> None:
    result = CliRunner().invoke(main, ["rules", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    assert schema == rules_file_schema()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "properties" in schema
    assert {"name", "match", "when", "actions", "limits", "mode", "enabled"} <= set(
        schema["properties"]
    )
    assert schema["additionalProperties"] is False
    assert schema["items"] == {"$ref": "#/$defs/Rule"}
    # every reference resolves
    refs = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                refs.add(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    for ref in refs:
        assert ref.startswith("#/$defs/")
        assert ref.removeprefix("#/$defs/") in schema["$defs"]
    # durations are written as text, defaults included
    within = schema["$defs"]["When"]["properties"]["within"]
    assert (within["type"], within["default"]) == ("string", "10m")
