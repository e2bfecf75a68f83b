"""The topics `offsetd run` makes before faust subscribes: named as faust names them, and what a
broker's metadata answer must show before the daemon may join its group."""

from __future__ import annotations

import faust
from faust.assignor.leader_assignor import LeaderAssignor

from offsetd.app.broker import state_table_of
from offsetd.app.internal_topics import events_topic_name, faust_topics, unconfirmed
from offsetd.config import Settings


def test_the_topics_made_first_are_the_ones_faust_would_make() -> None:
    settings = Settings.model_validate({"daemon": {"app_id": "offsetd-x", "partitions": 6}})
    app = faust.App("offsetd-x", topic_partitions=6)
    table = state_table_of(app, 6)
    changelog, leader = faust_topics(settings)
    assert changelog.name == table.changelog_topic.get_topic_name()
    assert changelog.partitions == 6
    assert table.changelog_topic.compacting
    assert changelog.config == {"cleanup.policy": "compact"}
    assert leader.name == LeaderAssignor(app)._leader_topic_name
    assert leader.partitions == 1
    assert events_topic_name("offsetd-x") == "offsetd-x-events"


def _topic(name: str, leaders: list[int], error: int = 0) -> tuple[object, ...]:
    partitions: list[tuple[object, ...]] = [
        (0, i, leader, [], [], []) for i, leader in enumerate(leaders)
    ]
    return (error, name, False, partitions)


def test_a_broker_answer_confirms_only_topics_it_lists_with_leaders() -> None:
    wanted = ["a", "b", "c", "d"]
    answer = [_topic("a", [1, 1]), _topic("b", [1, -1]), _topic("c", [], error=3)]
    assert unconfirmed(answer, wanted) == [
        "b has a partition without a leader",
        "c unknown",
        "d unknown",
    ]
    assert unconfirmed([_topic(n, [1]) for n in wanted], wanted) == []
