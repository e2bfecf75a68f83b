"""offsetd.scope (pure) and where it is read: the settings, the scope guard, the metadata cache.

Two offsetd deployments on one Connect cluster must each act only on the connectors they own.
These tests pin the rules of ownership (names, globs, labels; any match admits; empty = all; a
Connect cluster's own scope replaces the global one), the third answer "labels not known yet"
(never treated as "out", never acted on), how labels are read from a connector config (only
the `offsetd.label.*` entries: the rest may be secrets), the config errors (file, line, field),
and that the guard holds back every decision for a connector outside the scope.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import httpx
import pytest

from offsetd.config import ConnectCluster, ConnectorScope, RemediationSettings, load_settings
from offsetd.connect.client import ConnectClient
from offsetd.connect.meta import ConnectorMetaCache
from offsetd.engine import ConnectorMeta
from offsetd.errors import ConfigError
from offsetd.remediation.control_state import ControlState
from offsetd.remediation.guards import PROCEED, GuardContext, evaluate
from offsetd.retry import Backoff
from offsetd.scope import LABEL_PREFIX, Scope, labels_of, scope_of, split_owner_key
from tests.unit.remediation.test_remediation_guards import NOW, SINK, check, decision

ORDERS = Scope(connectors=("orders-*", "payments-sink"), labels=(("team", "payments"),))


# -- ownership ----------------------------------------------------------------------------------


def test_an_empty_scope_is_every_connector_without_needing_labels() -> None:
    """Today's behaviour stays the default: nothing configured, everything in scope."""
    verdict = Scope().check("anything", None)
    assert verdict.in_scope is True
    assert "every connector" in verdict.detail
    assert Scope().everything
    assert not ORDERS.everything


@pytest.mark.parametrize(
    ("connector", "labels", "expected"),
    [
        ("payments-sink", None, True),  # an exact name, labels unknown: no labels needed
        ("orders-eu-sink", None, True),  # a glob
        ("Orders-eu-sink", {}, False),  # globs are case-sensitive, like Connect's names
        ("payments-sink-2", {}, False),  # a name is not a prefix
        ("billing-sink", {"team": "payments"}, True),  # a label
        ("billing-sink", {"team": "billing"}, False),  # the key with another value
        ("billing-sink", {"owner": "payments"}, False),  # the value under another key
        ("billing-sink", {}, False),  # no labels at all
        ("billing-sink", None, None),  # labels not known yet: neither in nor out
    ],
)
def test_a_name_a_glob_or_a_label_admits(
    connector: str, labels: dict[str, str] | None, expected: bool | None
) -> None:
    assert ORDERS.check(connector, labels).in_scope is expected


def test_any_one_label_admits_and_the_verdict_says_which() -> None:
    """Labels are alternatives (team a OR team b), not a conjunction."""
    scope = Scope(labels=(("team", "a"), ("team", "b"), ("tier", "gold")))
    verdict = scope.check("x", {"team": "b", "tier": "silver"})
    assert verdict.in_scope is True
    assert "team=b" in verdict.detail
    assert scope.check("x", {"team": "c", "tier": "silver"}).in_scope is False


def test_a_scope_of_names_only_never_waits_for_labels() -> None:
    """Without label entries, an unmatched name is out even if its labels are unknown: no
    metadata is needed to decide it (the daemon does not hold such an event back)."""
    names = Scope(connectors=("a-*",))
    verdict = names.check("b-sink", None)
    assert verdict.in_scope is False
    assert "remediation.scope" in verdict.detail


def test_check_meta_reads_the_labels_of_the_metadata() -> None:
    meta = ConnectorMeta(SINK, "sink", labels={"team": "payments"})
    assert ORDERS.check_meta("billing-sink", meta).in_scope is True
    assert ORDERS.check_meta("billing-sink", None).in_scope is None  # no metadata yet
    # Metadata built without labels (not read) is "unknown", not "no labels".
    assert ORDERS.check_meta("billing-sink", ConnectorMeta(SINK, "sink")).in_scope is None


def test_a_connect_clusters_own_scope_replaces_the_global_one() -> None:
    remediation = RemediationSettings(scope=ConnectorScope(connectors=["global-*"]))
    own = ConnectCluster(
        url="http://c:8083", kafka_cluster="west", scope=ConnectorScope(labels=["team=a"])
    )
    inherits = ConnectCluster(url="http://c:8083", kafka_cluster="west")
    everything = ConnectCluster(url="http://c:8083", kafka_cluster="west", scope=ConnectorScope())

    scoped = scope_of(remediation, "east", own)
    assert scoped == Scope((), (("team", "a"),), "connect_clusters.east.scope")
    assert scoped.check("global-sink", {}).in_scope is False  # not added to the global one
    assert scope_of(remediation, "west", inherits).connectors == ("global-*",)
    assert scope_of(remediation, "west", None).source == "remediation.scope"
    # An explicitly empty scope on a cluster: every connector there, whatever the global says.
    assert scope_of(remediation, "all", everything).check("x", None).in_scope is True


def test_describe_says_what_the_deployment_acts_on() -> None:
    assert ORDERS.describe() == (
        "connectors orders-*, payments-sink or labels team=payments (remediation.scope)"
    )
    assert Scope().describe() == "every connector (remediation.scope is empty)"


# -- labels and keys ----------------------------------------------------------------------------


def test_labels_are_only_the_prefixed_config_entries() -> None:
    """Connector configs hold secrets: only `offsetd.label.*` entries are kept."""
    config = {
        "connector.class": SINK,
        "connection.password": "hunter2",
        f"{LABEL_PREFIX}team": "payments",
        f"{LABEL_PREFIX}app.kubernetes.io/name": "orders",
        LABEL_PREFIX: "no key",  # the bare prefix names no label
        "offsetd.labels.team": "typo",  # not the prefix
    }
    assert labels_of(config) == {"team": "payments", "app.kubernetes.io/name": "orders"}


def test_owner_keys_split_at_the_first_slash() -> None:
    """Aliases never contain '/'; connector names may."""
    assert split_owner_key("local/orders/eu-sink") == ("local", "orders/eu-sink")
    assert split_owner_key("local/east->west.MirrorSourceConnector") == (
        "local",
        "east->west.MirrorSourceConnector",
    )


# -- settings -----------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "offsetd.yaml"
    path.write_text(textwrap.dedent(text))
    return path


BASE = """\
kafka_clusters:
  west: {bootstrap_servers: "127.0.0.1:9092"}
connect_clusters:
  local:
    url: http://127.0.0.1:8083
    kafka_cluster: west
"""


def test_scopes_load_from_the_file_and_the_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        BASE
        + """\
    scope:
      connectors: [orders-*]
      labels: [team=payments, "app.kubernetes.io/name=orders"]
remediation:
  scope: {labels: [team=payments]}
""",
    )
    settings = load_settings(path, environ={})
    scope = settings.connect_clusters["local"].scope
    assert scope is not None
    assert scope.labels == ["team=payments", "app.kubernetes.io/name=orders"]
    assert settings.remediation.scope.labels == ["team=payments"]
    env = {"OFFSETD_CONNECT_CLUSTERS__LOCAL__SCOPE__CONNECTORS": '["billing-*"]'}
    overridden = load_settings(path, environ=env).connect_clusters["local"].scope
    assert overridden is not None
    assert overridden.connectors == ["billing-*"]
    # No scope anywhere: every connector, as before scopes existed.
    plain = load_settings(write(tmp_path, BASE), environ={})
    assert scope_of(plain.remediation, "local", plain.connect_clusters["local"]).everything


@pytest.mark.parametrize(
    ("tail", "needle", "field", "fragment"),
    [
        (
            "    scope:\n      labels: [team]\n",
            "labels: [team]",
            "connect_clusters.local.scope.labels[0]",
            "'team' is not key=value",
        ),
        (
            '    scope:\n      labels: ["=payments"]\n',
            "labels:",
            "connect_clusters.local.scope.labels[0]",
            "is not key=value",
        ),
        (
            "    scope:\n      connector: [orders-*]\n",
            "connector:",
            "connect_clusters.local.scope.connector",
            "unknown key",
        ),
        (
            'remediation:\n  scope:\n    connectors: [""]\n',
            "connectors:",
            "remediation.scope.connectors[0]",
            "at least 1 character",
        ),
    ],
)
def test_scope_errors_name_file_line_and_field(
    tmp_path: Path, tail: str, needle: str, field: str, fragment: str
) -> None:
    text = BASE + tail
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_settings(path, environ={})
    message = str(raised.value)
    line = next(i for i, t in enumerate(text.splitlines(), 1) if needle in t)
    assert message.startswith(f"{path}:{line}: {field}: "), message
    assert fragment in message


# -- the scope guard ----------------------------------------------------------------------------


def guard_ctx(
    scope: Scope | None, labels: dict[str, str] | None, settings: RemediationSettings | None = None
) -> GuardContext:
    return GuardContext(
        settings=settings or RemediationSettings(),
        control=ControlState(),
        connector_class=SINK,
        connector_type="sink",
        offsets_refusal=None,
        failing_connectors=1,
        now_ms=NOW,
        scope=scope,
        connector_labels=labels,
    )


@pytest.mark.parametrize(
    ("mode", "actions", "outcome"),
    [
        ("enforce", ("skip-record",), "planned"),
        ("observe", ("skip-record",), "planned"),  # not even a dry run: not ours
        ("enforce", ("notify",), "planned"),  # not ours to tell either
        ("approve", ("restart-failed-tasks",), "planned"),  # nobody is asked to approve it
        ("enforce", ("skip-record",), "suppressed"),  # before the engine's own reason
    ],
)
def test_the_guard_holds_back_every_decision_outside_the_scope(
    mode: str, actions: tuple[str, ...], outcome: str
) -> None:
    verdict = evaluate(
        decision(mode=mode, actions=actions, outcome=outcome, reason="cooldown"),
        guard_ctx(Scope(connectors=("billing-*",), source="connect_clusters.local.scope"), {}),
    )
    check(verdict, "suppressed_out_of_scope", "scope")
    assert "orders-sink matches no entry of connect_clusters.local.scope" in verdict.detail


def test_the_guard_does_not_act_while_the_labels_are_unknown() -> None:
    scope = Scope(labels=(("team", "payments"),))
    held = evaluate(decision(), guard_ctx(scope, None))
    check(held, "suppressed_out_of_scope", "scope")
    assert "labels are not known yet" in held.detail
    allowed = evaluate(decision(), guard_ctx(scope, {"team": "payments"}))
    check(allowed, PROCEED, "none")
    assert allowed.permit is not None


def test_without_a_cluster_scope_the_guard_reads_the_global_one() -> None:
    settings = RemediationSettings(scope=ConnectorScope(connectors=["orders-*"]))
    check(evaluate(decision(), guard_ctx(None, None, settings)), PROCEED, "none")
    other = evaluate(decision(connector="billing-sink"), guard_ctx(None, None, settings))
    check(other, "suppressed_out_of_scope", "scope")
    assert "remediation.scope" in other.detail
    # The defaults (no scope at all) leave every guard test elsewhere as it was.
    check(evaluate(decision(connector="any"), guard_ctx(None, None)), PROCEED, "none")


# -- the metadata cache keeps the labels --------------------------------------------------------

SECRET = "s3cr3t-do-not-keep"


class LabelledConnect:
    """Connect's listing and single-connector answers for connectors with labels (and a
    password in their config, which must not be kept)."""

    def __init__(self) -> None:
        self.connectors: dict[str, dict[str, str]] = {}
        self.calls: list[str] = []

    def add(self, name: str, **labels: str) -> None:
        config = {"connector.class": SINK, "connection.password": SECRET, "name": name}
        config.update({f"{LABEL_PREFIX}{k}": v for k, v in labels.items()})
        self.connectors[name] = config

    def info(self, name: str) -> dict[str, object]:
        return {"name": name, "config": self.connectors[name], "tasks": [], "type": "sink"}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request.url.path)
        if request.url.path == "/connectors":
            body = {
                name: {"info": self.info(name), "status": {"name": name, "tasks": []}}
                for name in self.connectors
            }
            return httpx.Response(200, json=body)
        name = request.url.path.removeprefix("/connectors/")
        if name not in self.connectors:
            return httpx.Response(404, json={"error_code": 404, "message": "not found"})
        return httpx.Response(200, json=self.info(name))


def test_lookup_reads_labels_at_start_then_each_new_connector_alone_and_keeps_no_secret() -> None:
    """The scope filter's lookup: the first read of the cluster is awaited (history replayed
    at start); a connector created since is read alone (one GET) rather than left unknown; one
    Connect does not know (deleted) is not asked about again within `absent_ttl_s`."""
    connect = LabelledConnect()
    connect.add("orders-sink", team="payments")
    now = [1000.0]

    async def scenario() -> list[ConnectorMeta | None]:
        http = httpx.AsyncClient(transport=httpx.MockTransport(connect), base_url="http://c")
        client = ConnectClient(http, backoff=Backoff(attempts=1))
        cache = ConnectorMetaCache({"local": client}, clock=lambda: now[0], absent_ttl_s=30)
        try:
            found = [await cache.lookup("local", "orders-sink")]
            assert connect.calls == ["/connectors"]
            connect.add("billing-sink", team="billing")  # created after the first read
            found.append(await cache.lookup("local", "billing-sink"))
            assert connect.calls == ["/connectors", "/connectors/billing-sink"]
            found.append(await cache.lookup("local", "deleted-sink"))
            found.append(await cache.lookup("local", "deleted-sink"))  # within the TTL
            assert connect.calls[2:] == ["/connectors/deleted-sink"]
            now[0] += 31
            found.append(await cache.lookup("local", "deleted-sink"))
            assert connect.calls[3:] == ["/connectors/deleted-sink"]
            found.append(await cache.lookup("other", "orders-sink"))  # not a cluster of ours
            return found
        finally:
            await cache.aclose()

    orders, billing, *absent, other = asyncio.run(scenario())
    assert orders is not None
    assert billing is not None
    assert (orders.labels, billing.labels) == ({"team": "payments"}, {"team": "billing"})
    assert absent == [None, None, None]
    assert other is None
    assert SECRET not in repr(orders) + repr(billing)
    assert ORDERS.check_meta("orders-sink", orders).in_scope is True
    assert ORDERS.check_meta("billing-sink", billing).in_scope is False
