"""The consumer-group settings of `offsetd run` and the client id that names a worker's beacon.

The group timings go to faust as they are, so what Kafka or faust would refuse at start (a
session shorter than the brokers' 6 s minimum, a heartbeat that cannot fit three times in a
session) must be refused when the config is read, with the field named. The client id carries a
worker's beacon (`offsetd.remediation.dead_members`) so that a restarted worker can tell a dead
member of the group from a live one: it must read back as exactly the owner tag it came from, and
nothing else may read as a tag.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from offsetd.config import DaemonSettings
from offsetd.remediation.dead_members import client_id, owner_of
from offsetd.remediation.sagas import beacon_of


def test_group_defaults_are_fausts_own() -> None:
    daemon = DaemonSettings()
    assert daemon.group_session_timeout == 60_000
    assert daemon.group_heartbeat_interval == 3_000
    assert daemon.group_rebalance_timeout == 60_000


def test_group_timings_kafka_would_refuse_are_refused() -> None:
    assert DaemonSettings(group_session_timeout="10s").group_session_timeout == 10_000
    with pytest.raises(ValidationError, match="group_session_timeout"):
        DaemonSettings(group_session_timeout="5s")
    with pytest.raises(ValidationError, match="at most a third"):
        DaemonSettings(group_session_timeout="6s", group_heartbeat_interval="3s")


def test_a_client_id_reads_back_as_the_owner_tag_it_names() -> None:
    owner = "offsetd@pod-0/1#0123456789abcdef on 3288783e-5ed8-4775-914a-d1c23bceac8e/net:[40265]"
    cid = client_id(owner)
    assert cid == "offsetd-0123456789abcdef-3288783e-5ed8-4775-914a-d1c23bceac8e-40265"
    tag = owner_of(cid)
    assert tag is not None
    assert beacon_of(tag) == beacon_of(owner)


def test_only_a_beacon_client_id_names_an_owner() -> None:
    assert client_id("offsetd@host/1") == "offsetd"  # no beacon, nothing to find later
    assert owner_of("offsetd") is None
    assert owner_of("faust-0.15.3") is None
    assert owner_of("offsetd-0123456789abcdef-not-a-boot-id-1") is None
