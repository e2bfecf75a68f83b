"""Rules, rule tests, settings and offsets documents are data: no code, bounded cost.

A file may not run code or read files (YAML tags are refused, not ignored), may not make the
loader expand aliases without bound (a "billion laughs" file), and a regex in a rule or record
check may not backtrack without bound (RE2: linear time).
"""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from offsetd.config import load_settings
from offsetd.errors import ConfigError, InvalidDocument
from offsetd.offsets.documents import parse_document
from offsetd.recordchecks import KafkaRecord, ValueMatches, fails
from offsetd.rules.loading import check_rule_files
from tests.unit.rules.test_rules_matching import dlq, matches

OFFSETD = [sys.executable, "-m", "offsetd"]

LAUGHS = """\
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def _two_gib_of_address_space() -> None:
    """The interpreter and its imports map about 1 GiB; the expansion would need far more."""
    limit = 2 << 30
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


# -- a billion laughs ---------------------------------------------------------------------------


def test_a_billion_laughs_rules_file_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    """387 million values if expanded; refused after about 100,000, by the real command."""
    path = write(tmp_path, "laughs.yaml", LAUGHS)
    started = time.monotonic()
    done = subprocess.run(
        [*OFFSETD, "rules", "check", str(path)],
        capture_output=True, text=True, timeout=60, check=False,
        preexec_fn=_two_gib_of_address_space,
    )  # fmt: skip
    took = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"{path}: refused: its aliases expand to more than 100,{len(LAUGHS):03d} values "
        "(anchors repeated inside anchors: a YAML bomb?)"
    )
    assert "Traceback" not in done.stderr
    assert took < 30, took


def test_aliases_within_the_allowance_are_still_yaml(tmp_path: Path) -> None:
    """Anchors and merge keys have honest uses: shared match blocks."""
    path = write(
        tmp_path,
        "shared.yaml",
        """\
        - name: a
          match: &sink-failures {kind: task_status, state: FAILED, connector: orders-*}
          actions: [{type: notify}]
        - name: b
          match: *sink-failures
          actions: [{type: notify}]
        """,
    )
    rules, problems = check_rule_files([path])
    assert problems == []
    assert [r.rule.name for r in rules] == ["a", "b"]
    assert rules[0].rule.match == rules[1].rule.match


def test_a_billion_laughs_offsets_document_is_refused() -> None:
    document = LAUGHS.replace("i: &i", "orders-sink: &i")
    with pytest.raises(InvalidDocument, match=r"aliases expand to more than"):
        parse_document(document)


# -- tags ---------------------------------------------------------------------------------------


def test_python_tags_in_a_rule_are_refused_and_run_nothing(tmp_path: Path) -> None:
    canary = tmp_path / "ran"
    path = write(
        tmp_path,
        "r.yaml",
        f"""\
        name: r
        match:
          kind: task_status
          connector: !!python/object/apply:os.system ["touch {canary}"]
          message: !!python/name:os.system
        actions: [{{type: notify}}]
        """,
    )
    _, problems = check_rule_files([path])
    assert problems == [
        f"{path}:4: match.connector: YAML tag !!python/object/apply:os.system is not allowed "
        "(these files are data: maps, lists, strings, numbers, booleans and null)"
    ]
    assert not canary.exists()


def test_a_custom_tag_is_refused_and_str_is_allowed(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        """\
        name: r
        match: {kind: task_status, connector: !!str 123}
        actions: [{type: notify, webhook: !vault secret/oncall}]
        """,
    )
    _, problems = check_rule_files([path])
    assert problems == [
        f"{path}:3: actions[0].webhook: YAML tag !vault is not allowed "
        "(these files are data: maps, lists, strings, numbers, booleans and null)"
    ]


def test_python_tags_in_the_settings_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "offsetd.yaml",
        """\
        kafka_clusters:
          main: !!python/object:builtins.dict {bootstrap_servers: "k:9092"}
        """,
    )
    with pytest.raises(ConfigError, match=r"offsetd.yaml:2: kafka_clusters.main: YAML tag "):
        load_settings(path, {})


def test_python_tags_in_a_rule_test_file_are_refused(tmp_path: Path) -> None:
    rules = write(tmp_path, "r.yaml", "name: r\nmatch: {kind: task_status}\nactions: []\n")
    tests = write(
        tmp_path,
        "t.yaml",
        f"""\
        rule_files: [{rules}]
        tests:
          - name: t
            events: !!python/object/apply:subprocess.check_output [["id"]]
        """,
    )
    done = subprocess.run(
        [*OFFSETD, "rules", "test", str(tests)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "YAML tag !!python/object/apply:subprocess.check_output is not allowed" in (
        done.stdout + done.stderr
    )
    assert "Traceback" not in done.stderr


def test_python_tags_in_an_offsets_document_are_refused() -> None:
    with pytest.raises(InvalidDocument, match="a YAML tag that is not data at line 1"):
        parse_document('orders-sink: !!python/object/apply:os.system ["true"]\n')


def test_deep_nesting_is_refused_not_a_crash(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")
    _, problems = check_rule_files([path])
    assert problems == [f"{path}: refused: nested too deeply"]
    with pytest.raises(InvalidDocument, match="nested too deeply"):
        parse_document("x: " + "[" * 5000 + "]" * 5000)


# -- regexes ------------------------------------------------------------------------------------

# Exponential under a backtracking engine: Python's `re` takes 0.55 s for 22 a's; 4,000 would
# never end. RE2 answers in linear time.
CATASTROPHIC = r"(a+)+$"
NOT_QUITE = "a" * 4000 + "!"


@pytest.mark.timeout(30)
def test_a_catastrophic_message_regex_is_matched_in_linear_time() -> None:
    event = dlq(message=NOT_QUITE)
    started = time.monotonic()
    assert not matches({"kind": "dlq_record", "message": CATASTROPHIC}, event)
    assert matches({"kind": "dlq_record", "message": CATASTROPHIC}, dlq(message="x" + "a" * 4000))
    assert time.monotonic() - started < 5


@pytest.mark.timeout(30)
def test_a_catastrophic_connector_regex_is_matched_in_linear_time() -> None:
    event = dlq(connector=NOT_QUITE)
    assert not matches({"kind": "dlq_record", "connector": {"regex": CATASTROPHIC}}, event)


@pytest.mark.timeout(30)
def test_a_catastrophic_record_check_is_matched_in_linear_time() -> None:
    check = ValueMatches(kind="value_matches", pattern=r"(x+x+)+y")
    record = KafkaRecord("t", 0, 1, key=None, value=b"x" * 100_000)
    started = time.monotonic()
    assert not fails(check, record)
    assert time.monotonic() - started < 5


def test_a_regex_that_needs_backtracking_is_refused_where_it_is_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "r.yaml",
        r"""
        name: r
        match:
          kind: task_status
          message: '(\w+) failed: \1'
          connector: {regex: 'orders-(?!test)'}
        actions: [{type: notify}]
        """,
    )
    _, problems = check_rule_files([path])
    assert problems == [
        f"{path}:6: match.connector[0].regex: invalid regex: invalid perl operator: (?! "
        "(lookaround and named backreferences are not supported: regexes run on RE2, "
        "in linear time)",
        f"{path}:5: match.message[0]: invalid regex: invalid escape sequence: \\1 "
        "(backreferences (\\1) and \\Z are not supported; \\z ends a text: regexes run on RE2, "
        "in linear time)",
    ]
