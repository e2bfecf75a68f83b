"""Every offsetd path on the secure stack, as offsetd's own principal, and no secret in anything.

The configuration is the one `offsetd dev env --write-config` writes: offsetd's SCRAM principal
and REST user, passwords as `{file: ...}`. The tests repeat what the plaintext tests show of the
offsets toolkit (online over HTTPS with basic auth, and `--offline` on the Kafka topics and
groups), the Spark rewind plan, the control commands and `config show`; every word offsetd says
goes into one transcript. The module's last test reads offsetd's own topics (snapshots, audit,
control, quarantine with headers) and the stack's logs, adds what offsetd says when a password
is wrong, and searches all of it for every password of the stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient
from ruamel.yaml import YAML

from offsetd.audit import AuditLog
from offsetd.config import load_settings
from offsetd.devstack.stack import StackInfo
from offsetd.errors import ConnectAccessDenied, KafkaAuthFailed
from offsetd.events.models import RecordRef
from offsetd.remediation.control import ControlStore
from offsetd.remediation.quarantine import Quarantine
from offsetd.remediation.records import read_record
from tests.integration.kafkautil import json_file_sink, string_file_source, unique, wait_for
from tests.integration.lagutil import lag_serve
from tests.integration.secureutil import (
    SecureConnect,
    Transcript,
    create_topic,
    produce,
    stack_secrets,
    topic_texts,
)

pytestmark = pytest.mark.integration

# Not a password of the stack: what a config names through {env:} and {file:} in the wrong-
# password tests. Distinctive, so an echo of it anywhere is found.
DISTINCT_KAFKA = "Zk7-distinctive-kafka-secret-4Qp"
DISTINCT_REST = "Rv2-distinctive-rest-secret-9Lm"


@pytest.fixture(scope="module")
def transcript() -> Transcript:
    return Transcript()


@pytest.fixture(scope="module")
def sconnect(secure_stack: StackInfo) -> SecureConnect:
    return SecureConnect(secure_stack)


@pytest.fixture(scope="module")
def admin(secure_stack: StackInfo) -> dict[str, str]:
    """The stack administrator's settings on west (Connect's cluster): the tests' own writes."""
    return secure_stack.admin_config("west")


@pytest.fixture(scope="module")
def topics() -> dict[str, str]:
    """offsetd's durable topics for this module (own names: nothing else writes to them)."""
    return {
        "control_topic": unique("offsetd.control-sec"),
        "quarantine_topic": unique("offsetd.quarantine-sec"),
        "sagas_topic": unique("offsetd.sagas-sec"),
        "audit_topic": unique("offsetd.audit-sec"),
    }


@pytest.fixture(scope="module")
def own_config(
    secure_yaml: Path, topics: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The secure offsetd.yaml with this module's control, quarantine, sagas and audit topics."""
    yaml = YAML()
    data = yaml.load(secure_yaml.read_text())
    data["remediation"] = {k: v for k, v in topics.items() if k != "audit_topic"}
    data["daemon"] = {"audit_topic": topics["audit_topic"]}
    path = tmp_path_factory.mktemp("secure-toolkit") / "offsetd.yaml"
    with path.open("w") as out:
        yaml.dump(data, out)
    return path


def _state(connect: SecureConnect, name: str) -> tuple[str, list[str]]:
    status = connect.status(name)
    assert status is not None
    return status["connector"]["state"], [t["state"] for t in status["tasks"]]


def _stop(connect: SecureConnect, name: str) -> None:
    assert connect.http.put(connect.path(name, "/stop")).status_code == 204
    wait_for(f"{name} STOPPED", lambda: _state(connect, name) == ("STOPPED", []))


def _offsets(connect: SecureConnect, name: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = connect.offsets(name)["offsets"]
    return entries


def _history(transcript: Transcript, config: Path, name: str) -> list[tuple[str, str]]:
    listed = transcript.json_of(config, "offsets", "history", "--connector", name)
    return [(h["operation"], h["status"]) for h in listed]


# -- the offsets toolkit: a source connector ------------------------------------------------------


def test_source_toolkit_online_and_offline(
    secure_stack: StackInfo,
    secure_yaml: Path,
    sconnect: SecureConnect,
    admin: dict[str, str],
    transcript: Transcript,
    tmp_path: Path,
) -> None:
    """export, alter, import, undo, reset and history over HTTPS; list, alter and undo
    --offline on Connect's offsets topic as offsetd's principal (refused while a worker runs
    the task, as on the plaintext stack)."""
    source = tmp_path / "in.txt"
    source.write_text("".join(f"row {i}\n" for i in range(8)))
    size = source.stat().st_size
    part = {"filename": str(source)}
    topic, name = unique("sec-src"), unique("sec-src")
    create_topic(admin, topic)
    sconnect.create(name, string_file_source(source, topic))
    try:
        sconnect.wait_running(name)
        at_end = [{"partition": part, "offset": {"position": size}}]
        wait_for("the whole file read", lambda: _offsets(sconnect, name) == at_end)

        exported = json.loads(transcript.ok(secure_yaml, "offsets", "export", "--connectors", name))
        assert exported == {name: at_end}

        doc = json.dumps({name: [{"partition": part, "offset": {"position": 10}}]})
        refused = transcript.run(
            secure_yaml, "offsets", "alter", name, "--offline", "--file", "-", input=doc
        )
        assert refused.returncode == 14, refused.stderr  # the worker runs the task
        assert "has live tasks on a running worker (task 0 RUNNING)" in refused.stderr
        assert _offsets(sconnect, name) == at_end

        _stop(sconnect, name)
        altered = transcript.json_of(
            secure_yaml, "offsets", "alter", name, "--file", "-", input=doc
        )
        assert altered[0]["final_state"] == "STOPPED"
        at_10 = [{"partition": part, "offset": {"position": 10}}]
        assert _offsets(sconnect, name) == at_10

        imported = transcript.json_of(
            secure_yaml, "offsets", "import", "-", input=json.dumps(exported)
        )
        assert [i["connector"] for i in imported] == [name]
        assert _offsets(sconnect, name) == at_end
        transcript.json_of(secure_yaml, "offsets", "undo", imported[0]["snapshot_id"])
        assert _offsets(sconnect, name) == at_10

        reset = transcript.json_of(secure_yaml, "offsets", "reset", name)[0]
        assert _offsets(sconnect, name) == []
        transcript.json_of(secure_yaml, "offsets", "undo", reset["snapshot_id"])
        assert _offsets(sconnect, name) == at_10

        # --offline: the offsets topic itself, read and written with offsetd's principal
        listed = transcript.json_of(secure_yaml, "offsets", "list", name, "--offline")
        assert listed == {name: at_10}
        doc_3 = json.dumps({name: [{"partition": part, "offset": {"position": 3}}]})
        offline = transcript.json_of(
            secure_yaml, "offsets", "alter", name, "--offline", "--file", "-", input=doc_3
        )[0]
        assert offline["report"]["kind"] == "source"
        at_3 = [{"partition": part, "offset": {"position": 3}}]
        wait_for("REST to show position 3", lambda: _offsets(sconnect, name) == at_3)
        transcript.json_of(secure_yaml, "offsets", "undo", offline["snapshot_id"], "--offline")
        wait_for("REST to show position 10 again", lambda: _offsets(sconnect, name) == at_10)

        history = _history(transcript, secure_yaml, name)
        # an offline undo is recorded as one more offline write (the offline backend's way)
        assert [operation for operation, _status in history[:2]] == ["offline-alter"] * 2
        assert history[2:] == [
            ("undo", "applied"),
            ("reset", "undone"),
            ("undo", "applied"),
            ("alter", "undone"),  # the import
            ("alter", "applied"),
        ]
    finally:
        sconnect.delete(name)


# -- the offsets toolkit: a sink connector ------------------------------------------------------


def _committed(connect: SecureConnect, name: str) -> int | None:
    entries = _offsets(connect, name)
    return entries[0]["offset"]["kafka_offset"] if entries else None


def test_sink_toolkit_online_and_offline(
    secure_yaml: Path,
    sconnect: SecureConnect,
    admin: dict[str, str],
    transcript: Transcript,
    tmp_path: Path,
) -> None:
    """alter --shift-by, export, reset and undo over HTTPS; the group altered and restored
    --offline as offsetd's principal; the sink then re-delivers from where offsetd put it."""
    topic, name, out = unique("sec-sink"), unique("sec-sink"), tmp_path / "out.txt"
    create_topic(admin, topic)
    produce(admin, topic, [(f"k{i}".encode(), json.dumps({"n": i}).encode()) for i in range(5)])
    sconnect.create(name, json_file_sink(topic, out))
    try:
        sconnect.wait_running(name)
        wait_for("5 records committed", lambda: _committed(sconnect, name) == 5)
        doc = {
            name: [
                {
                    "partition": {"kafka_topic": topic, "kafka_partition": 0},
                    "offset": {"kafka_offset": 1},
                }
            ]
        }
        running = transcript.run(
            secure_yaml, "offsets", "alter", name, "--offline", "--file", "-",
            input=json.dumps(doc),
        )  # fmt: skip
        assert running.returncode == 14, running.stderr  # the worker runs the task
        assert "has live tasks on a running worker (task 0 RUNNING)" in running.stderr
        _stop(sconnect, name)

        shifted = transcript.json_of(secure_yaml, "offsets", "alter", name, "--shift-by", "-2")[0]
        assert shifted["diff"][0]["before"] == {"kafka_offset": 5}
        assert shifted["diff"][0]["after"] == {"kafka_offset": 3}
        assert _committed(sconnect, name) == 3
        exported = json.loads(transcript.ok(secure_yaml, "offsets", "export", "--connectors", name))
        assert exported[name][0]["offset"] == {"kafka_offset": 3}

        reset = transcript.json_of(secure_yaml, "offsets", "reset", name)[0]
        assert _committed(sconnect, name) is None
        transcript.json_of(secure_yaml, "offsets", "undo", reset["snapshot_id"])
        assert _committed(sconnect, name) == 3

        offline = transcript.json_of(
            secure_yaml, "offsets", "alter", name, "--offline", "--file", "-",
            input=json.dumps(doc),
        )[0]  # fmt: skip
        assert offline["report"]["kind"] == "sink"
        assert _committed(sconnect, name) == 1
        transcript.json_of(secure_yaml, "offsets", "undo", offline["snapshot_id"], "--offline")
        assert _committed(sconnect, name) == 3

        assert _history(transcript, secure_yaml, name)[2:] == [
            ("undo", "applied"),
            ("reset", "undone"),
            ("alter", "applied"),
        ]
        assert sconnect.http.put(sconnect.path(name, "/resume")).status_code == 202
        lines = wait_for(
            "records 3 and 4 again",
            lambda: (out.read_text().splitlines() if out.exists() else [])[5:] or None,
        )
        assert lines == ["{n=3}", "{n=4}"]
    finally:
        sconnect.delete(name)


# -- the Spark rewind plan ----------------------------------------------------------------------


def test_rewind_plan_scans_the_secure_cluster(
    secure_stack: StackInfo,
    secure_yaml: Path,
    sconnect: SecureConnect,
    admin: dict[str, str],
    transcript: Transcript,
    tmp_path: Path,
) -> None:
    """Spark's Kafka source reads over SASL_SSL with offsetd's principal (password from its
    file, the stack's CA as a PEM truststore) and finds the one bad record; no process's
    command line holds a password while Spark runs."""
    topic, name = unique("sec-rewind"), unique("sec-rewind")
    create_topic(admin, topic)
    values = [{"i": i, "status": "bad" if i == 17 else "ok"} for i in range(30)]
    produce(admin, topic, [(None, json.dumps(v).encode()) for v in values])
    sconnect.create(name, json_file_sink(topic, tmp_path / "out.txt"))
    try:
        sconnect.wait_running(name)
        wait_for("30 committed", lambda: _committed(sconnect, name) == 30)
        plan = tmp_path / "plan.json"
        ran, seen = transcript.run_watched(
            secure_yaml, "rewind", "plan", "--connector", name, "--mode", "first-match",
            "--predicate", "value.status = 'bad'", "--value-schema", "i INT, status STRING",
            "--out", str(plan),
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr + ran.stdout
        assert json.loads(plan.read_text()) == {
            name: [
                {
                    "partition": {"kafka_topic": topic, "kafka_partition": 0},
                    "offset": {"kafka_offset": 17},
                }
            ]
        }
        assert any("org.apache.spark" in line for line in seen), seen  # Spark's JVM was seen
        dry = transcript.ok(secure_yaml, "offsets", "import", str(plan), "--dry-run")
        assert "dry run: nothing was changed" in dry
        assert _committed(sconnect, name) == 30
    finally:
        sconnect.delete(name)


# -- the control commands as offsetd's principal ------------------------------------------------


def test_control_commands_as_offsetds_principal(
    own_config: Path, admin: dict[str, str], topics: dict[str, str], transcript: Transcript
) -> None:
    """pause / resume-automation, opt-out / opt-in, approvals, breaker, history and quarantine
    list read and write offsetd's topics with its least-ACL principal."""
    config = own_config
    assert transcript.json_of(config, "automation", "status")["paused"] is None
    transcript.ok(config, "pause", "--reason", "db migration", "--by", "alice")
    status = transcript.json_of(config, "automation", "status")
    assert (status["paused"]["by"], status["paused"]["reason"]) == ("alice", "db migration")
    again = transcript.run(config, "pause")
    assert again.returncode != 0
    assert "already paused" in again.stderr
    transcript.ok(config, "resume-automation", "--by", "bob")
    assert transcript.json_of(config, "automation", "status")["paused"] is None

    transcript.ok(config, "opt-out", "orders-sink", "--reason", "vendor bug", "--by", "dan")
    status = transcript.json_of(config, "automation", "status")
    assert [(o["connector"], o["reason"]) for o in status["opt_outs"]] == [
        ("orders-sink", "vendor bug")
    ]
    transcript.ok(config, "opt-in", "orders-sink")
    assert transcript.json_of(config, "automation", "status")["opt_outs"] == []

    settings = load_settings(config)
    store = ControlStore.for_settings(settings)
    store.load()
    with store:  # the daemon's side, as offsetd's principal too
        store.request_approval("dec-1", "skip-poison", "local", "orders-sink", "skip 41")
        store.set_breaker(
            "local", "orders-sink", open=True, by="offsetd", why="failed again", decision_id="d9"
        )
    pending = transcript.json_of(config, "approvals")
    assert [(p["decision_id"], p["summary"]) for p in pending] == [("dec-1", "skip 41")]
    assert "approved dec-1" in transcript.ok(config, "approve", "dec-1", "--by", "alice")
    assert transcript.json_of(config, "approvals") == []
    listed = transcript.json_of(config, "breaker", "list")
    assert [(b["connector"], b["decision_id"]) for b in listed] == [("orders-sink", "d9")]
    assert "reset by carol" in transcript.ok(
        config, "breaker", "reset", "orders-sink", "--by", "carol"
    )
    assert transcript.json_of(config, "breaker", "list") == []

    kafka = settings.kafka_clusters["west"].client_config()
    audit = AuditLog(kafka, topics["audit_topic"])
    audit.start()
    decision = {
        "id": unique("dec"),
        "rule": "poison-record-skip",
        "mode": "auto",
        "outcome": "planned",
        "connector": "orders-sink",
        "decided_at_ms": 1_700_000_000_000,
        "actions": [{"type": "skip"}],
    }
    try:
        assert asyncio.run(audit.write(decision))
    finally:
        audit.close()
    shown = transcript.json_of(config, "history", "--connector", "orders-sink")
    assert [h["id"] for h in shown] == [decision["id"]]

    source = unique("sec-poison")
    create_topic(admin, source)
    produce(admin, source, [(b"k", b"poison")], headers=[("trace-id", b"t-1")])
    original = read_record(kafka, RecordRef(topic=source, partition=0, offset=0))
    assert original is not None
    quarantine = Quarantine(kafka, topics["quarantine_topic"], timeout_s=20)
    try:
        context = {
            "connector.name": "orders-sink",
            "connect.cluster": "local",
            "exception.message": "bad record",
            "decision.id": str(decision["id"]),
        }
        quarantine.copy("saga-sec", quarantine.mark("saga-sec"), original, context)
    finally:
        quarantine.close()
    (copied,) = transcript.json_of(config, "quarantine", "list")
    assert copied["record"] == {"topic": source, "partition": 0, "offset": 0}
    assert copied["value_base64"] == "cG9pc29u"  # b"poison"


# -- config show and wrong passwords ------------------------------------------------------------


def _wrong_passwords(secure_yaml: Path, tmp_path: Path) -> Path:
    """The config with a wrong Kafka password ({env:} SEC_TEST_KAFKA_PW, to be set to
    DISTINCT_KAFKA) and a wrong REST password ({file:}, DISTINCT_REST)."""
    secret_file = tmp_path / "rest-password"
    secret_file.write_text(DISTINCT_REST + "\n")
    return _with_passwords(
        secure_yaml,
        tmp_path / "wrong.yaml",
        {"env": "SEC_TEST_KAFKA_PW"},
        {"file": str(secret_file)},
    )


def _with_passwords(secure_yaml: Path, target: Path, kafka: Any, rest: Any) -> Path:
    yaml = YAML()
    data = yaml.load(secure_yaml.read_text())
    for cluster in data["kafka_clusters"].values():
        cluster["sasl"]["password"] = kafka
    data["connect_clusters"]["local"]["auth"]["password"] = rest
    with target.open("w") as out:
        yaml.dump(data, out)
    return target


def test_config_show_redacts_file_and_env_passwords(
    secure_stack: StackInfo, secure_yaml: Path, transcript: Transcript, tmp_path: Path
) -> None:
    shown = transcript.ok(secure_yaml, "config", "show")
    assert "security_protocol: SASL_SSL" in shown
    assert "username: offsetd" in shown
    assert shown.count("'**********'") == 3  # two Kafka clusters' passwords, Connect's

    secret_file = tmp_path / "rest-password"
    secret_file.write_text(DISTINCT_REST + "\n")
    mixed = _with_passwords(
        secure_yaml,
        tmp_path / "mixed.yaml",
        {"env": "SEC_TEST_KAFKA_PW"},
        {"file": str(secret_file)},
    )
    done = transcript.run(mixed, "config", "show", env={"SEC_TEST_KAFKA_PW": DISTINCT_KAFKA})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("'**********'") == 3  # read from the variable and the file
    assert DISTINCT_KAFKA not in done.stdout + done.stderr
    assert DISTINCT_REST not in done.stdout + done.stderr


def test_a_wrong_password_fails_without_echoing_it(
    secure_yaml: Path, transcript: Transcript, tmp_path: Path
) -> None:
    """A wrong Kafka password ({env:}) and a wrong REST password ({file:}) fail the command
    with an error that names neither."""
    wrong = _wrong_passwords(secure_yaml, tmp_path)
    env = {"SEC_TEST_KAFKA_PW": DISTINCT_KAFKA}
    cases = [
        (("offsets", "list", "heartbeat-audit", "--offline"), KafkaAuthFailed.exit_code),
        (("offsets", "list", "heartbeat-audit"), ConnectAccessDenied.exit_code),
        (("lag", "-o", "json"), KafkaAuthFailed.exit_code),
        (("pause", "--by", "mallory"), KafkaAuthFailed.exit_code),
    ]
    for args, exit_code in cases:
        done = transcript.run(wrong, *args, env=env, timeout=120)
        assert done.returncode == exit_code, (args, done.stderr)
        assert "user offsetd" in done.stderr, (args, done.stderr)  # who was refused
        assert "Traceback" not in done.stderr, (args, done.stderr)
        said = done.stdout + done.stderr
        assert DISTINCT_KAFKA not in said
        assert DISTINCT_REST not in said


_THREADS_AT_EXIT = """
import atexit, os, sys
def threads():
    tasks = os.listdir("/proc/self/task")
    names = sorted(open(f"/proc/self/task/{t}/comm").read().strip() for t in tasks)
    print("threads at exit:", names, file=sys.stderr)
atexit.register(threads)
from offsetd.cli import main
sys.argv = ["offsetd", "offsets", "list", "heartbeat-audit", "--offline", "--config", sys.argv[1]]
main()
"""


def test_a_refused_login_leaves_no_kafka_client_running_at_exit(
    secure_yaml: Path, tmp_path: Path
) -> None:
    """The login check's client is gone before the process exits. It lived on in the refusal's
    traceback, and the exit's OpenSSL cleanup then ran under its threads: a segfault (exit -11)
    after the right message, in CI, and 2 of 60 refused logins under load."""
    wrong = _wrong_passwords(secure_yaml, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _THREADS_AT_EXIT, str(wrong)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "SEC_TEST_KAFKA_PW": DISTINCT_KAFKA},
    )
    assert done.returncode == KafkaAuthFailed.exit_code, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("threads at exit:")]
    assert "rdk:" not in line, line  # librdkafka names its threads rdk:main, rdk:broker...


# -- the leak search ----------------------------------------------------------------------------


def test_the_lag_page_as_offsetds_principal(
    secure_yaml: Path, transcript: Transcript, tmp_path: Path
) -> None:
    """`offsetd lag serve`'s /metrics page (a running offsetd's page) on the secure stack."""
    with lag_serve(secure_yaml, tmp_path / "lag-state.json") as url:

        def heartbeats() -> str | None:
            text = httpx.get(url, timeout=10).text
            return text if "heartbeats" in text else None

        page = wait_for("the heartbeats' lag on the page", heartbeats)
    assert "offsetd_" in page
    transcript.keep("lag serve /metrics", page)


def test_nothing_offsetd_said_or_wrote_holds_a_secret(
    secure_stack: StackInfo, admin: dict[str, str], topics: dict[str, str], transcript: Transcript
) -> None:
    """Everything the tests above made offsetd print (stdout, stderr, Spark's and librdkafka's
    output, every process's command line during the scan), offsetd's topics record by record
    with their headers, and the stack's logs: no password of the stack, and neither of the
    distinctive wrong passwords, is in any of it."""
    texts = dict(transcript.texts)
    assert len(texts) >= 60, sorted(texts)  # the module ran in full, not one test of it
    existing = set(AdminClient(dict(admin)).list_topics(timeout=10).topics)
    ours = [topics["control_topic"], topics["quarantine_topic"], topics["audit_topic"]]
    assert {"offsetd.snapshots", *ours} <= existing
    defaults = ["offsetd.audit", "offsetd.sagas", "offsetd.control", "offsetd.quarantine"]
    for topic in ["offsetd.snapshots", *ours]:  # written by the tests above
        texts[f"topic {topic}"] = topic_texts(admin, topic)
        assert texts[f"topic {topic}"], f"{topic} is empty"
    for topic in defaults:  # the demo's daemon's, when it ran on this stack
        if topic in existing:
            texts[f"topic {topic}"] = topic_texts(admin, topic)
    for log in sorted(Path(secure_stack.run_dir, "logs").glob("*.log")):
        texts[f"log {log.name}"] = log.read_text(errors="replace")

    secrets = [*stack_secrets(secure_stack), DISTINCT_KAFKA, DISTINCT_REST]
    assert all(len(s) >= 8 for s in secrets)  # none so short that it shows up by chance
    # the search finds a password where one is: in the admin's own client settings
    assert sum(s in json.dumps(admin) for s in secrets) == 1
    # which text holds which secret (by index: a failure must not print the secret itself)
    leaks = [(what, i) for what, text in texts.items() for i, s in enumerate(secrets) if s in text]
    assert leaks == []
