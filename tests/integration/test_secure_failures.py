"""Bad credentials and certificates fail fast, in one line, with their own exit code.

What is real: the secure local stack's brokers (SASL_SSL, SCRAM-SHA-512) and Connect (HTTPS,
basic auth) answer every case but two; offsetd runs as a subprocess, as an operator runs it.
The wrong passwords and a foreign CA are offsetd's own configuration. The stack's servers hold a
valid certificate for 127.0.0.1/localhost, so an *expired* certificate and one for *another
host* come from a small TLS server in this test (Python's ssl) whose certificates
`offsetd.devstack.tls.server_certificate` makes, signed by the stack's own CA: the handshake
offsetd does with it is a real one. A Connect 403 cannot be made on this stack (its basic-auth
extension has no roles): `tests/unit/connect/test_connect_access.py` covers that mapping.
"""

from __future__ import annotations

import json
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from offsetd.devstack.jars import java_executable
from offsetd.devstack.stack import StackInfo
from offsetd.devstack.tls import keytool_of, make_ca, server_certificate
from tests.integration.daemonproc import Daemon, free_port
from tests.integration.lagutil import OFFSETD

pytestmark = pytest.mark.integration

WRONG = "wrong-Pa55word-never-shown"  # the wrong password: it must appear in no output
TIMEOUT_S = 10.0  # what offsetd gives a login probe; plus a margin for the process to start
MARGIN_S = 5.0


def _config(secure_yaml: Path, folder: Path, **changes: Any) -> Path:
    """secure_yaml with a wrong Kafka/REST password file or another CA file."""
    config = YAML().load(secure_yaml.read_text())
    wrong = folder / "wrong-password"
    wrong.write_text(WRONG)
    for cluster in config["kafka_clusters"].values():
        if changes.get("kafka_password"):
            cluster["sasl"]["password"] = {"file": str(wrong)}
        if changes.get("ca_file"):
            cluster["tls"]["ca_file"] = str(changes["ca_file"])
    for cluster in config["connect_clusters"].values():
        if changes.get("rest_password"):
            cluster["auth"]["password"] = {"file": str(wrong)}
        if changes.get("ca_file"):
            cluster["tls"]["ca_file"] = str(changes["ca_file"])
        if changes.get("connect_url"):
            cluster["url"] = changes["connect_url"]
    if changes.get("web_port"):
        config.setdefault("daemon", {})["web_port"] = changes["web_port"]
    path = folder / "offsetd.yaml"
    with path.open("w") as out:
        YAML().dump(config, out)
    return path


def _fails(config: Path, *command: str, code: int, names: list[str]) -> float:
    """Run the command; assert its exit code and one stderr line naming `names`; its time."""
    started = time.monotonic()
    done = subprocess.run(
        [str(OFFSETD), *command, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S + MARGIN_S + 30,
        check=False,
    )
    took = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), done.stderr
    for name in names:
        assert name in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert WRONG not in done.stderr + done.stdout
    assert took < TIMEOUT_S + MARGIN_S, took
    return took


def _west(stack: StackInfo) -> str:
    return str(stack.clusters["west"]["bootstrap.servers"])


def test_a_wrong_kafka_password(secure_stack: StackInfo, secure_yaml: Path, tmp_path: Path) -> None:
    config = _config(secure_yaml, tmp_path, kafka_password=True)
    names = ["refused the login of user offsetd", "invalid credentials", _west(secure_stack)]
    _fails(config, "history", code=59, names=["Kafka cluster west", *names])
    _fails(config, "lag", code=59, names=["refused the login of user offsetd"])
    _fails(config, "approvals", code=59, names=["Kafka cluster west", *names])


@pytest.fixture(scope="module")
def foreign_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA nobody in the stack knows (keytool, as the stack makes its own)."""
    folder = tmp_path_factory.mktemp("foreign-ca")
    return make_ca(keytool_of(java_executable()), folder, "foreign", "foreign-store-pw")[1]


def test_an_unknown_ca(
    secure_stack: StackInfo, secure_yaml: Path, tmp_path: Path, foreign_ca: Path
) -> None:
    config = _config(secure_yaml, tmp_path, ca_file=foreign_ca)
    kafka = ["TLS handshake with Kafka cluster west", _west(secure_stack), "certificate verify"]
    _fails(config, "history", code=60, names=[*kafka, str(foreign_ca)])
    connect = ["TLS handshake with Connect at", secure_stack.connect["url"], "certificate"]
    _fails(config, "offsets", "list", code=60, names=connect)


def test_a_wrong_connect_password(
    secure_stack: StackInfo, secure_yaml: Path, tmp_path: Path
) -> None:
    config = _config(secure_yaml, tmp_path, rest_password=True)
    names = [secure_stack.connect["url"], "refused our credentials (user offsetd): 401"]
    _fails(config, "offsets", "list", code=61, names=names)
    _fails(config, "lag", code=61, names=names)  # not a warning and exit 0


# -- certificates only a test server can present ------------------------------------------------


def _pem_pair(p12: Path, password: str) -> tuple[Path, Path]:
    """The keystore's certificate chain and key as PEM (Python's ssl reads no PKCS12)."""
    cert, key = p12.with_suffix(".crt.pem"), p12.with_suffix(".key.pem")
    for args, out in (([" -nokeys"], cert), ([" -nocerts", " -nodes"], key)):
        subprocess.run(
            ["openssl", "pkcs12", "-in", str(p12), "-passin", f"pass:{password}", "-out", str(out)]
            + [a.strip() for a in args],
            check=True,
            capture_output=True,
        )
    return cert, key


@pytest.fixture(scope="module")
def bad_certificates(
    secure_stack: StackInfo, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, Path]]:
    """Server certificates signed by the stack's CA: expired, and for another host."""
    tls = Path(secure_stack.security["folder"]) / "tls"
    password = (tls / "store-password").read_text().strip()
    keytool = keytool_of(java_executable())
    folder = tmp_path_factory.mktemp("bad-certs")
    made = {}
    for name, options in {
        "expired": {"start": "-30d", "validity_days": 2},
        "elsewhere": {"names": "dns:elsewhere.example"},
    }.items():
        store = server_certificate(
            keytool, (tls / "ca.p12", tls / "ca.pem"), folder / f"{name}.p12", password,
            **options,  # type: ignore[arg-type]
        )  # fmt: skip
        made[name] = _pem_pair(store, password)
    return made


def _tls_server(cert: Path, key: Path) -> Iterator[str]:
    """An HTTPS endpoint that completes no request: only its handshake matters."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                with context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize(
    ("which", "reason"),
    [
        ("expired", "certificate has expired"),
        ("elsewhere", "mismatch, certificate is not valid for"),
    ],
)
def test_an_expired_or_wrong_host_connect_certificate(
    secure_yaml: Path,
    tmp_path: Path,
    bad_certificates: dict[str, tuple[Path, Path]],
    which: str,
    reason: str,
) -> None:
    for url in _tls_server(*bad_certificates[which]):
        config = _config(secure_yaml, tmp_path, connect_url=url)
        names = [f"TLS handshake with Connect at {url}", reason]
        _fails(config, "offsets", "list", code=60, names=names)


# -- the daemon waits, unready, and says why ----------------------------------------------------


def _page(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:  # noqa: S310 (http:// only)
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("kafka_password", "Kafka cluster west"),
        ("rest_password", "refused our credentials (user offsetd): 401"),
    ],
)
def test_the_daemon_waits_unready_and_says_why(
    secure_yaml: Path, tmp_path: Path, change: str, reason: str
) -> None:
    port = free_port()
    config = _config(secure_yaml, tmp_path, web_port=port, **{change: True})
    daemon = Daemon(
        config,
        tmp_path / "daemon.log",
        port,
        args=["run", "--config", str(config), "--rules", "rules/examples"],
    )
    daemon.start(wait=False)
    assert daemon.proc is not None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if _page(f"http://127.0.0.1:{port}/healthz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        time.sleep(12)  # several retries (every 5 s)
        assert daemon.proc.poll() is None, daemon.log()
        assert _page(f"http://127.0.0.1:{port}/healthz")[0] == 200
        status, body = _page(f"http://127.0.0.1:{port}/readyz")
        assert status == 503, body
        assert reason in body["checks"]["startup"]["detail"], body
    finally:
        daemon.kill(signal.SIGTERM)
    text = daemon.log()
    assert [line for line in text.splitlines() if "not ready:" in line and reason in line]
    assert len([line for line in text.splitlines() if "not ready:" in line]) == 1, text
    assert "Traceback" not in text
    assert WRONG not in text
