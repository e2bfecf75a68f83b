"""offsetd's least privilege, the proof's parts: what the SCRAM stack's proof
(`test_least_privilege.py`) and the client-certificate stack's (`test_mtls.py`) share.

A principal of its own, of either kind (`KINDS`: a SCRAM user, or a certificate `CN=<name>`
signed by the stack's CA), gets exactly offsetd's ACLs (`devstack.security.OFFSETD_ACLS`, the
least-privilege table of docs/security.md) on both clusters, and control and snapshot topics of
its own. `NEEDS` says which ACL each toolkit feature needs and the words its refusal must say;
`feature` runs one as that principal, `every_feature_passes` all of them; `refused_without`
removes a feature's ACL, runs it until it is refused (an ACL change reaches every broker within
moments), grants the ACL back and returns the one error line; `daemon_waits_for_group_read`
shows the daemon unready without READ on its group. Only the login differs between the kinds:
what a feature does and what its refusal must say are the same, so they are written once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # not in its __all__
    AclBindingFilter,
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.cimpl import NewTopic
from ruamel.yaml import YAML

from offsetd.devstack import mm2
from offsetd.devstack.mtls import client_certificate
from offsetd.devstack.mtls import principal as certificate_principal
from offsetd.devstack.security import OFFSETD_ACLS, Acl
from offsetd.devstack.stack import StackInfo
from tests.integration.cliutil import leaf_argv
from tests.integration.daemonproc import Daemon, free_port
from tests.integration.kafkautil import json_file_sink, string_file_source, unique, wait_for
from tests.integration.lagutil import OFFSETD
from tests.integration.secureutil import SecureConnect, create_topic, produce

__all__ = [
    "GROUP_READ",
    "KINDS",
    "NEEDS",
    "Connectors",
    "Kind",
    "Principal",
    "Runner",
    "checkpointed",
    "daemon_waits_for_group_read",
    "every_feature_passes",
    "feature",
    "feature_passes",
    "grant",
    "made_connectors",
    "made_principal",
    "refused_without",
    "revoke",
    "run",
    "run_offsetd",
]

CLUSTERS = ("east", "west")
Kind = Literal["scram", "certificate"]
KINDS: tuple[Kind, ...] = ("scram", "certificate")


class Runner(Protocol):
    """How a principal's commands run: `run_offsetd`, or a `Transcript`'s `run` (which keeps
    what offsetd said for a module's leak search)."""

    def __call__(
        self, config: Path, *args: str, input: str | None = ..., timeout: float = ...
    ) -> subprocess.CompletedProcess[str]: ...


def run_offsetd(
    config: Path, *args: str, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`offsetd <args> --config <config>` as its own process, its output captured."""
    return subprocess.run(
        [str(OFFSETD), *leaf_argv(config, args)],
        input=input,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass(frozen=True)
class Principal:
    """A principal of its own with offsetd's ACLs. `name` is Kafka's principal name, what its
    ACLs (`User:<name>`) and refusals name: the SCRAM user, or the certificate's subject
    `CN=<login>`; `login` is the user or the certificate's common name (its topics and the
    daemon's groups are named after it)."""

    name: str
    config: Path  # offsetd.yaml as this principal (Connect's REST login stays offsetd's)
    acls: list[Acl]
    kind: Kind
    login: str
    runner: Runner = run_offsetd


def _admins(stack: StackInfo) -> list[AdminClient]:
    return [
        AdminClient(dict[str, str | int | float | bool](stack.admin_config(alias)))
        for alias in CLUSTERS
    ]


def grant(stack: StackInfo, acls: list[Acl]) -> None:
    for admin in _admins(stack):
        for future in admin.create_acls([a.binding() for a in acls]).values():
            future.result(timeout=30)


def revoke(stack: StackInfo, acls: list[Acl]) -> None:
    for admin in _admins(stack):
        filters = []
        for acl in acls:
            b = acl.binding()
            filters.append(
                AclBindingFilter(
                    b.restype,
                    b.name,
                    b.resource_pattern_type,
                    b.principal,
                    b.host,
                    b.operation,
                    b.permission_type,
                )
            )
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)


def run(
    principal: Principal, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return principal.runner(principal.config, *args, input=stdin, timeout=120)


# -- the principal, of either kind ---------------------------------------------------------------


@contextmanager
def _scram_user(stack: StackInfo, login: str, folder: Path, doc: Any) -> Iterator[str]:
    """A SCRAM user `login` on both clusters, its password a file the config names."""
    password = uuid.uuid4().hex
    password_file = folder / "kafka-password"
    password_file.write_text(password)
    for admin in _admins(stack):
        upsert = UserScramCredentialUpsertion(
            login, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)
    for cluster in doc["kafka_clusters"].values():
        cluster["sasl"]["username"] = login
        cluster["sasl"]["password"] = {"file": str(password_file)}
    try:
        yield login
    finally:
        for admin in _admins(stack):
            gone = UserScramCredentialDeletion(login, ScramMechanism.SCRAM_SHA_512)
            for future in admin.alter_user_scram_credentials([gone]).values():
                future.result(timeout=30)


@contextmanager
def _certificate(stack: StackInfo, login: str, folder: Path, doc: Any) -> Iterator[str]:
    """A certificate `CN=<login>` the stack's CA signs (as Strimzi's User Operator issues a
    `tls` KafkaUser's), the Kafka clusters' `tls.cert_file`/`key_file` in the config."""
    tls = Path(stack.security["folder"]) / "tls"
    password = (tls / "store-password").read_text().strip()
    cert = client_certificate((tls / "ca.p12", tls / "ca.pem"), folder, login, password)
    for cluster in doc["kafka_clusters"].values():
        cluster["tls"]["cert_file"] = str(cert.cert_pem)
        cluster["tls"]["key_file"] = str(cert.key_pem)
    yield certificate_principal(login)  # nothing to remove: the brokers keep no user for it


@contextmanager
def made_principal(
    kind: Kind, stack: StackInfo, base: Path, folder: Path, runner: Runner = run_offsetd
) -> Iterator[Principal]:
    """A principal of `kind` with offsetd's ACLs only, and an offsetd.yaml (from the stack's,
    `base`) naming it; its own control and snapshot topics (made by the stack's admin, like an
    operator would), so nothing it does touches the stack's `offsetd` principal's state."""
    login = f"offsetd-lp-{uuid.uuid4().hex[:6]}"
    yaml = YAML()
    doc = yaml.load(base.read_text())
    with _LOGINS[kind](stack, login, folder, doc) as name:
        acls = [replace(acl, principal=name) for acl in OFFSETD_ACLS]
        grant(stack, acls)
        try:
            control, snapshots = _own_topics(stack, login)
            doc.setdefault("remediation", {})["control_topic"] = control
            doc.setdefault("offsets", {})["snapshots_topic"] = snapshots
            config = folder / "offsetd.yaml"
            with config.open("w") as out:
                yaml.dump(doc, out)
            yield Principal(name, config, acls, kind, login, runner)
        finally:
            revoke(stack, acls)


_LOGINS = {"scram": _scram_user, "certificate": _certificate}


def _own_topics(stack: StackInfo, login: str) -> tuple[str, str]:
    """The control and snapshot topics of principal `login`, compacted, made on west."""
    suffix = login.removeprefix("offsetd-")
    control, snapshots = f"offsetd.{suffix}.control", f"offsetd.{suffix}.snapshots"
    admin = AdminClient(dict[str, str | int | float | bool](stack.admin_config("west")))
    compact = {"cleanup.policy": "compact"}
    futures = admin.create_topics(
        [NewTopic(control, 1, 1, config=compact), NewTopic(snapshots, 1, 1, config=compact)]
    )
    for future in futures.values():
        future.result(timeout=30)
    return control, snapshots


# -- the toolkit's subjects ----------------------------------------------------------------------


@dataclass(frozen=True)
class Connectors:
    source: str
    source_file: Path
    sink: str  # its group is Connect's default, connect-<name>
    sink_topic: str
    mirrored_group: str  # a group on east that MM2 checkpoints to west: lag reads its offsets


def _stop(connect: SecureConnect, name: str) -> None:
    connect.http.put(connect.path(name, "/stop")).raise_for_status()

    def stopped() -> bool:
        status = connect.status(name)
        return bool(
            status is not None and status["connector"]["state"] == "STOPPED" and not status["tasks"]
        )

    wait_for(f"{name} STOPPED", stopped)


@contextmanager
def made_connectors(stack: StackInfo, folder: Path) -> Iterator[Connectors]:
    """A source with a flushed offset and two sinks with committed groups, all STOPPED: the
    offline toolkit's subjects (made as the stack's admin)."""
    connect = SecureConnect(stack)
    west = stack.admin_config("west")
    source_file = folder / "in.txt"
    source_file.write_text("".join(f"row {i}\n" for i in range(6)))
    source, sink = unique("lp-src"), unique("lp-sink")
    source_topic, sink_topic = unique("lp-src"), unique("lp-sink")
    create_topic(west, source_topic)
    create_topic(west, sink_topic)
    produce(west, sink_topic, [(b"k", b'{"a": 1}')] * 4)
    connect.create(source, string_file_source(source_file, source_topic))
    connect.create(sink, json_file_sink(sink_topic, folder / "out.txt"))
    try:
        size = source_file.stat().st_size
        wait_for(
            "the source's flushed offset",
            lambda: (
                connect.offsets(source)["offsets"]
                == [{"partition": {"filename": str(source_file)}, "offset": {"position": size}}]
            ),
        )
        wait_for(
            f"{sink} to commit 4",
            lambda: (
                connect.offsets(sink)["offsets"]
                and connect.offsets(sink)["offsets"][0]["offset"] == {"kafka_offset": 4}
            ),
        )
        for name in (source, sink):
            _stop(connect, name)
        group = unique("lp-mirrored")
        _commit_at_end(stack.admin_config("east"), group, mm2.HEARTBEATS_TOPIC)
        yield Connectors(source, source_file, sink, sink_topic, group)
    finally:
        for name in (source, sink):
            connect.delete(name)


def _commit_at_end(conf: dict[str, str], group: str, topic: str) -> None:
    """`group` has read `topic` to its end: MM2's checkpoint connector will translate it."""
    consumer = Consumer({**conf, "group.id": group, "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        _low, high = consumer.get_watermark_offsets(tp, timeout=10)
        consumer.commit(offsets=[TopicPartition(topic, 0, high)], asynchronous=False)
    finally:
        consumer.close()


def checkpointed(p: Principal, group: str) -> bool:
    done = run(p, "lag", "-o", "json")
    return done.returncode == 0 and any(
        c["group"] == group for c in json.loads(done.stdout)["checkpoints"]
    )


# -- what each feature asks of Kafka, as the CLI runs it --------------------------------------


def _source_doc(c: Connectors, position: int) -> str:
    partition = {"filename": str(c.source_file)}
    return json.dumps({c.source: [{"partition": partition, "offset": {"position": position}}]})


def _sink_doc(c: Connectors, offset: int | None) -> str:
    partition = {"kafka_topic": c.sink_topic, "kafka_partition": 0}
    entry = {"partition": partition, "offset": None if offset is None else {"kafka_offset": offset}}
    return json.dumps({c.sink: [entry]})


def feature(p: Principal, c: Connectors, which: str) -> subprocess.CompletedProcess[str]:
    """Run one feature as `p`: the command that needs the ACL of the same key."""
    if which == "read topics":
        return run(p, "offsets", "list", c.source, "--offline", "-o", "json")
    if which == "write the offsets topic":
        doc = _source_doc(c, 2)
        return run(p, "offsets", "alter", c.source, "--offline", "--file", "-", stdin=doc)
    if which == "create own topics":
        fresh = f"offsetd.lp-{uuid.uuid4().hex[:6]}.control"
        config = p.config.with_name(f"fresh-{fresh}.yaml")
        config.write_text(p.config.read_text().replace(_control_topic(p), fresh))
        return run(replace(p, config=config), "approvals")
    if which == "write own topics":
        return run(p, "pause", "--reason", "least privilege")
    if which == "describe own topics' configs":
        return run(p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=_sink_doc(c, 3))
    if which == "describe groups":
        return run(p, "lag", "-o", "json")  # the checkpointed group's committed offsets
    if which == "read Connect's groups":
        return run(p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=_sink_doc(c, 1))
    if which == "delete Connect's groups' offsets":
        doc = _sink_doc(c, None)
        return run(p, "offsets", "alter", c.sink, "--offline", "--file", "-", stdin=doc)
    raise AssertionError(which)


def _control_topic(p: Principal) -> str:
    return str(YAML(typ="safe").load(p.config.read_text())["remediation"]["control_topic"])


# the ACL each feature needs (by its index in OFFSETD_ACLS), and the words its error must say
NEEDS = {
    "read topics": (0, "READ on topic 'connect-offsets'"),
    "write the offsets topic": (1, "WRITE on topic 'connect-offsets'"),
    "create own topics": (2, "CREATE on topic 'offsetd.lp-"),
    "write own topics": (3, "WRITE on topic 'offsetd.lp-"),
    "describe own topics' configs": (4, "DESCRIBE_CONFIGS on topic 'offsetd.lp-"),
    "describe groups": (6, "DESCRIBE on group '"),  # the first checkpointed group
    "read Connect's groups": (7, "READ on group 'connect-lp-sink-"),
    "delete Connect's groups' offsets": (8, "DELETE on group 'connect-lp-sink-"),
}
GROUP_READ = 5  # READ on the daemon's own groups: `daemon_waits_for_group_read`


def feature_passes(
    p: Principal, c: Connectors, which: str, within_s: float = 0
) -> subprocess.CompletedProcess[str]:
    """`feature`, asserted to succeed, tried again for `within_s` (an ACL just granted reaches
    every broker within moments); a pause is resumed, so the next feature runs unpaused."""
    deadline = time.monotonic() + within_s
    done = feature(p, c, which)
    while done.returncode != 0 and time.monotonic() < deadline:
        time.sleep(1)
        done = feature(p, c, which)
    assert done.returncode == 0, (which, done.stdout, done.stderr)
    if which == "write own topics":
        resumed = run(p, "resume-automation")
        assert resumed.returncode == 0, resumed.stderr
    return done


def every_feature_passes(p: Principal, c: Connectors) -> None:
    """With offsetd's ACLs, every feature of `NEEDS` works, and so do the audit's readers and
    `offsetd lag` (without an error on either cluster)."""
    wait_for("MM2 to checkpoint the mirrored group", lambda: checkpointed(p, c.mirrored_group))
    for which in NEEDS:
        feature_passes(p, c, which)
    for command in (("history",), ("quarantine", "list"), ("offsets", "history")):
        done = run(p, *command)
        assert done.returncode == 0, (command, done.stderr)
    lag = run(p, "lag", "-o", "json")
    assert lag.returncode == 0, lag.stderr
    assert not json.loads(lag.stdout)["errors"]


def refused_without(stack: StackInfo, p: Principal, c: Connectors, which: str) -> str:
    """`which`'s ACL removed: the feature fails in seconds, exit code 58, with one error line
    naming the operation, the resource and the principal; the ACL is granted back. The line."""
    index, words = NEEDS[which]
    acl = p.acls[index]
    revoke(stack, [acl])
    try:
        deadline = time.monotonic() + 20  # an ACL change reaches every broker within moments
        while True:
            started = time.monotonic()
            done = feature(p, c, which)
            took = time.monotonic() - started
            if done.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        grant(stack, [acl])
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode == 58, (which, done.stderr)
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert words in errors[0], errors[0]
    assert p.name in errors[0], errors[0]
    assert took < 30, f"{which}: {took:.1f} s"
    return errors[0]


# -- the daemon: READ on its own groups -----------------------------------------------------------


def _readyz(port: int) -> tuple[int, str]:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=3)
    except httpx.HTTPError:
        return 0, ""
    return answer.status_code, answer.text


def _readyz_saying(port: int, words: str) -> tuple[int, str] | None:
    page = _readyz(port)
    return page if words in page[1] else None


def daemon_waits_for_group_read(stack: StackInfo, p: Principal, folder: Path) -> str:
    """Without READ on its consumer group the daemon is unready and names the ACL (faust's join
    alone would wait in silence); once the ACL is granted it starts, without a restart. The
    `/readyz` page that named it."""
    port = free_port()
    app_id = f"offsetd-{p.login.removeprefix('offsetd-')}-daemon"
    yaml = YAML()
    doc = yaml.load(p.config.read_text())
    doc["daemon"] = {"web_port": port, "app_id": app_id}
    config = folder / "offsetd.yaml"
    with config.open("w") as out:
        yaml.dump(doc, out)
    acl = p.acls[GROUP_READ]
    assert (acl.resource, acl.name, acl.operation) == ("group", "offsetd", "READ")
    revoke(stack, [acl])
    daemon = Daemon(
        config,
        folder / "daemon.log",
        port,
        args=["run", "--config", str(config), "--rules", "rules/examples"],
    )
    daemon.start(wait=False)
    granted = False
    try:
        status, body = wait_for(
            "/readyz to name the missing ACL",
            lambda: _readyz_saying(port, "READ on group"),
            timeout_s=60,
        )
        assert status == 503, body
        assert f"needs READ on group '{app_id}" in body, body
        assert daemon.proc is not None
        assert daemon.proc.poll() is None, daemon.log()
        grant(stack, [acl])
        granted = True
        wait_for("the daemon to become ready", lambda: _readyz(port)[0] == 200, timeout_s=120)
    finally:
        if not granted:
            grant(stack, [acl])
        daemon.kill(signal.SIGTERM)
    text = daemon.log()
    said = [line for line in text.splitlines() if "not ready:" in line]
    assert len(said) == 1, text
    assert "READ on group" in said[0]
    assert "Traceback" not in text
    return body
