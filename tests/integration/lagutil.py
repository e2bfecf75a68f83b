"""The pieces the MM2 lag stack tests share: `offsetd lag serve`, a real Prometheus, the page."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from ruamel.yaml import YAML

from tests.integration.daemonproc import free_port
from tests.integration.kafkautil import wait_for

__all__ = [
    "OFFSETD",
    "Page",
    "fetch_page",
    "firing",
    "lag_config_file",
    "lag_serve",
    "parse_page",
    "prometheus_scraping",
    "query",
    "shortened_rules",
    "stop_process",
]

OFFSETD = Path(sys.executable).with_name("offsetd")
Page = dict[tuple[str, frozenset[tuple[str, str]]], float]


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def parse_page(text: str) -> Page:
    """Every sample of a page; the parser fails on a malformed page (e.g. a family twice)."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def fetch_page(url: str) -> Page | None:
    try:
        response = httpx.get(url, timeout=5)
    except httpx.HTTPError:
        return None
    if response.status_code != 200 or not response.text:
        return None
    return parse_page(response.text)


def lag_config_file(stack_config: Path, target: Path, lag: dict[str, object]) -> Path:
    """The stack's offsetd.yaml with its `lag` section replaced by `lag`, written to `target`."""
    yaml = YAML()
    data = yaml.load(stack_config.read_text())
    data["lag"] = dict(lag)
    with target.open("w") as out:
        yaml.dump(data, out)
    return target


@contextmanager
def lag_serve(config: Path, state: Path) -> Iterator[str]:
    """`offsetd lag serve` as its own process, stopped by its PID; yields its /metrics URL."""
    port = free_port()
    proc = subprocess.Popen(
        [str(OFFSETD), "lag", "serve", "--config", str(config), "--port", str(port),
         "--state-file", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for("the first lag page", lambda: fetch_page(url), timeout_s=60)
        yield url
    finally:
        stop_process(proc)


def shortened_rules(path: Path, target: Path) -> None:
    """The shipped rules with every `for:` cut to 2 s (the only change)."""
    yaml = YAML()
    doc = yaml.load(path)
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "2s"
    with target.open("w") as out:
        yaml.dump(doc, out)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def prometheus_scraping(home: Path, metrics_urls: list[str], rules: Path | None) -> Iterator[str]:
    """A real Prometheus scraping `metrics_urls` every second (with `rules`); yields its URL."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: run scripts/bootstrap (Debian package prometheus)"
    targets = [u.removeprefix("http://").removesuffix("/metrics") for u in metrics_urls]
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)] if rules is not None else [],
        "scrape_configs": [{"job_name": "offsetd", "static_configs": [{"targets": targets}]}],
    }
    (home / "prometheus.yml").write_text(json.dumps(config))
    port = free_port()
    proc = subprocess.Popen(
        [binary, f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=(home / "prometheus.log").open("wb"),
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("Prometheus ready", lambda: _ready(url), timeout_s=60)
        yield url
    finally:
        stop_process(proc)


def query(prom: str, expr: str) -> list[dict[str, object]]:
    """An instant query's result vector."""
    response = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert response["status"] == "success", (expr, response)
    result: list[dict[str, object]] = response["data"]["result"]
    return result


def firing(prom: str, alert: str, connector: str) -> bool:
    alerts = httpx.get(f"{prom}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    return any(
        a["labels"].get("alertname") == alert
        and a["labels"].get("connector") == connector
        and a["state"] == "firing"
        for a in alerts
    )
