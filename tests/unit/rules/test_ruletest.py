"""offsetd.ruletest and `offsetd rules test|explain`: promtool-style rule tests."""

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from offsetd.cli import main
from offsetd.ruletest import format_result, run_test_file

EXAMPLES = Path(__file__).resolve().parents[3] / "rules" / "examples"
EXAMPLE_TESTS = sorted((EXAMPLES / "tests").glob("*.yaml"))

RULES = """\
- name: restart
  mode: enforce
  match: {kind: task_status, state: FAILED}
  actions:
    - type: restart-failed-tasks
      backoff: {initial: 30s, factor: 2, max: 10m}
  limits: {cooldown: 0s}
- name: skip
  match: {kind: dlq_record}
  when: {count: 2, within: 5m, key: [connector, record]}
  actions: [{type: skip-record}]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def rules_dir(tmp_path: Path) -> Path:
    write(tmp_path, "rules/r.yaml", RULES)
    return tmp_path / "rules"


def test_there_are_example_tests() -> None:
    names = {p.name for p in EXAMPLE_TESTS}
    assert {
        "poison-record.yaml",
        "transient-restart.yaml",
        "needs-a-person.yaml",
        "dlq-flood.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLE_TESTS, ids=lambda p: p.name)
def test_example_rule_tests_pass(path: Path) -> None:
    result = run_test_file(path)
    assert result.ok, "\n".join(format_result(result))
    assert len(result.cases) >= 3


def test_cli_runs_the_example_tests() -> None:
    result = CliRunner().invoke(main, ["rules", "test", *map(str, EXAMPLE_TESTS)])
    assert result.exit_code == 0, result.output
    assert "FAILED" not in result.output
    assert result.output.count("Unit Testing:") == len(EXAMPLE_TESTS)


def test_passing_and_failing_tests_with_a_readable_diff(rules_dir: Path) -> None:
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: [../r.yaml]
        tests:
          - name: good
            events:
              - {at: 0s, kind: task_status, connector: c, task_id: 0, state: FAILED}
              - {at: 1m, kind: task_status, connector: c, task_id: 0, state: RUNNING}
              - {at: 2m, kind: task_status, connector: c, task_id: 0, state: FAILED}
            expect:
              - {at: 0s, rule: restart, mode: enforce, actions: [restart-failed-tasks],
                 task_id: 0, not_before: 30s}
              - {at: 2m, rule: restart, not_before: 3m}
          - name: bad
            events:
              - {at: 0s, kind: task_status, connector: c, task_id: 0, state: FAILED}
            expect:
              - {at: 0s, rule: restart, not_before: 1m}
              - {at: 5m, rule: skip}
          - name: must not fire
            events:
              - &d {at: 0s, kind: dlq_record, connector: c,
                    record: {topic: t, partition: 0, offset: 5}}
              - {<<: *d, at: 1m}
            expect: []
        """,
    )
    result = run_test_file(path)
    assert not result.ok
    assert [c.ok for c in result.cases] == [True, False, False]
    lines = format_result(result)
    assert lines == [
        f"Unit Testing: {path}",
        "  OK      good",
        "  FAILED  bad",
        "    expected but not produced:",
        "      - at 0s rule=restart outcome=planned not_before=1m",
        "      - at 5m rule=skip outcome=planned",
        "    produced but not expected:",
        "      + at 0s rule=restart connector=c outcome=planned actions=[restart-failed-tasks] "
        "task_id=0 not_before=30s",
        "    all decisions produced:",
        "        at 0s rule=restart connector=c outcome=planned actions=[restart-failed-tasks] "
        "task_id=0 not_before=30s",
        "  FAILED  must not fire",
        "    produced but not expected:",
        "      + at 1m rule=skip connector=c outcome=planned actions=[skip-record] "
        "record=t-0@5 record_status=exact",
        "    all decisions produced:",
        "        at 1m rule=skip connector=c outcome=planned actions=[skip-record] "
        "record=t-0@5 record_status=exact",
    ]
    cli = CliRunner().invoke(main, ["rules", "test", str(path)])
    assert cli.exit_code == 1
    assert "FAILED  bad" in cli.output


def test_friendly_event_defaults(rules_dir: Path) -> None:
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: ["../*.yaml"]
        tests:
          - name: trace, now, repeat, source override
            events:
              # a replay: arrives 1h late, never fires
              - {at: 0s, now: 1h, kind: task_status, connector: c, task_id: 0, state: FAILED}
              # a series: DLQ records 10s apart; the same source offset twice is read once
              - {at: 1m, repeat: 2, every: 10s, kind: dlq_record, connector: c,
                 source: {offset: 40}, record: {topic: t, partition: 0, offset: 5},
                 trace: "x.Boom: no", stage: TASK_PUT}
              - {at: 2m, kind: dlq_record, connector: c, source: {offset: 41},
                 record: {topic: t, partition: 0, offset: 5}}
              - {at: 3m, kind: task_status, connect_cluster: other, connector: c, task_id: 1,
                 state: FAILED, trace: "java.net.SocketTimeoutException: Read timed out"}
            expect:
              - {at: 1m10s, rule: skip, record: {topic: t, partition: 0, offset: 5},
                 record_status: exact}
              - {at: 3m, rule: restart, task_id: 1, not_before: 3m30s}
        """,
    )
    result = run_test_file(path)
    assert result.ok, "\n".join(format_result(result))
    produced = result.cases[0].decisions
    assert produced[0].inputs.trigger.stage == "TASK_PUT"
    assert produced[0].inputs.trigger.exception_class == "x.Boom"
    assert [e.offset for e in produced[0].inputs.events] == [40, 41]
    assert produced[1].connect_cluster == "other"


def test_errors_in_test_files_name_file_line_and_field(rules_dir: Path) -> None:
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: [../r.yaml]
        tests:
          - name: bad event
            events:
              - {at: 0s, kind: dlq_record, connector: c, state: FAILED}
              - {at: soon, kind: task_status, connector: c, state: FAILED}
            expect: []
        """,
    )
    result = run_test_file(path)
    assert result.problems == [
        f"{path}:6: tests[0].events[1].at: invalid duration 'soon': use "
        "a number and a unit, e.g. 30s, 10m, 1h30m (units ms, s, m, h, d)"
    ]
    path.write_text(path.read_text().replace("at: soon", "at: 1s"))
    result = run_test_file(path)
    assert result.problems == [
        f"{path}:5: tests[0].events[0].state: unknown key",  # DLQ events have no state
        f"{path}:6: tests[0].events[1].task_id: required field is missing",
    ]


def test_unknown_rules_and_missing_rule_files(rules_dir: Path) -> None:
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: [../r.yaml, ../missing.yaml]
        tests: [{name: x, expect: []}]
        """,
    )
    assert run_test_file(path).problems == [
        f"{path}:1: rule_files[1]: no file matches '../missing.yaml'"
    ]
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: [../r.yaml]
        tests:
          - name: x
            expect:
              - {at: 0s, rule: nope}
        """,
    )
    assert run_test_file(path).problems == [
        f"{path}:5: tests[0].expect[0].rule: no rule named 'nope' in the rule files"
    ]
    broken = write(rules_dir, "broken.yaml", "name: b\nmatch: {kind: task_status}\n")
    path = write(
        rules_dir, "tests/t.yaml", "rule_files: [../broken.yaml]\ntests: [{name: x, expect: []}]\n"
    )
    result = run_test_file(path)
    assert result.problems == [f"{broken}:1: actions: required field is missing"]
    assert format_result(result)[1] == "  FAILED (the test file or its rules are invalid):"


def test_expect_is_required(rules_dir: Path) -> None:
    path = write(rules_dir, "tests/t.yaml", "rule_files: [../r.yaml]\ntests: [{name: x}]\n")
    assert run_test_file(path).problems == [f"{path}:2: tests[0].expect: required field is missing"]


def test_cli_explain(rules_dir: Path, tmp_path: Path) -> None:
    event = write(
        tmp_path,
        "event.yaml",
        """\
        kind: task_status
        connector: c
        task_id: 0
        state: FAILED
        trace: |
          org.apache.kafka.connect.errors.ConnectException: boom
        """,
    )
    result = CliRunner().invoke(main, ["rules", "explain", str(rules_dir), str(event)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "failure class: unknown (no known exception class in the trace)",
        "restart: matches (counts toward 1 within 10m per connector)",
        "skip: no match: kind is task_status, rule wants dlq_record",
    ]
    bad = write(tmp_path, "bad.yaml", "kind: task_status\nconnector: c\nstate: FAILED\nbogus: 1\n")
    result = CliRunner().invoke(main, ["rules", "explain", str(rules_dir), str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:4: bogus: unknown key" in result.output
    wrong = write(tmp_path, "wrong.yaml", "kind: dlq_record\nconnector: c\nstate: FAILED\n")
    result = CliRunner().invoke(main, ["rules", "explain", str(rules_dir), str(wrong)])
    assert result.exit_code == 1
    assert result.output.strip() == f"{wrong}:3: state: unknown key"  # DLQ events have none


def test_expect_speaks_the_audits_words_for_a_suppression(rules_dir: Path) -> None:
    """`outcome: suppressed_cooldown` is `outcome: suppressed, reason: cooldown`; a diff says
    it the same way; a contradicting `reason` is an error naming file, line and field. (The
    second firing of the skip falls within its default cooldown.)"""
    path = write(
        rules_dir,
        "tests/t.yaml",
        """\
        rule_files: [../r.yaml]
        tests:
          - name: the second failure within the cooldown
            events:
              - &d {at: 0s, kind: dlq_record, connector: c,
                    record: {topic: t, partition: 0, offset: 5}}
              - {<<: *d, at: 1s}
              - {<<: *d, at: 2s}
              - {<<: *d, at: 3s}
            expect:
              - {at: 1s, rule: skip}
              - {at: 3s, rule: skip, outcome: suppressed_budget}
        """,
    )
    lines = format_result(run_test_file(path))
    assert "      - at 3s rule=skip outcome=suppressed_budget" in lines, lines
    produced = [line for line in lines if line.startswith("      + ")]
    assert len(produced) == 1, lines
    assert " outcome=suppressed_" in produced[0], lines
    reason = produced[0].split(" outcome=suppressed_")[1].split()[0]
    path.write_text(path.read_text().replace("suppressed_budget", f"suppressed_{reason}"))
    assert run_test_file(path).ok
    contradicting = f"outcome: suppressed_{reason}, reason: disabled"
    path.write_text(path.read_text().replace(f"outcome: suppressed_{reason}", contradicting))
    assert run_test_file(path).problems == [
        f"{path}:12: tests[0].expect[1]: outcome suppressed_{reason} contradicts reason disabled"
    ]
