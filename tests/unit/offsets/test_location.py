"""offsetd.offsets.location: where a connector's offsets live, from its config and the worker."""

import os

import pytest

from offsetd.config import Settings
from offsetd.errors import ConfigError
from offsetd.offsets.location import (
    KafkaEndpoint,
    WorkerView,
    endpoint_for,
    parse_properties,
    resolve_location,
    worker_view,
)
from offsetd.offsets.model import ConnectorKind


@pytest.fixture(autouse=True)
def _no_offsetd_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings reads OFFSETD_* from the environment: keep the tests independent of it.
    for name in list(os.environ):
        if name.upper().startswith("OFFSETD_"):
            monkeypatch.delenv(name)


def make_settings() -> Settings:
    return Settings.model_validate(
        {
            "kafka_clusters": {
                "main": {"bootstrap_servers": "k1:9092,k2:9092"},
                "east": {"bootstrap_servers": "east1:9092, east2:9092"},
                "west": {"bootstrap_servers": "west1:9092"},
            },
            "connect_clusters": {
                "local": {
                    "url": "http://connect:8083",
                    "kafka_cluster": "main",
                    "offsets_topic": "local-offsets",
                }
            },
        }
    )


@pytest.fixture
def settings() -> Settings:
    return make_settings()


@pytest.fixture
def worker(settings: Settings) -> WorkerView:
    return worker_view(settings, "local")


# -- worker_view / endpoint_for -------------------------------------------------------------------


def test_worker_view_from_settings(worker: WorkerView) -> None:
    assert worker.cluster == KafkaEndpoint("k1:9092,k2:9092", "main")
    assert worker.offsets_topic == "local-offsets"
    assert not worker.exactly_once


def test_worker_view_properties_override(settings: Settings) -> None:
    view = worker_view(
        settings,
        "local",
        {
            "offset.storage.topic": "props-offsets",
            "bootstrap.servers": "west1:9092",
            "exactly.once.source.support": "enabled",
        },
    )
    assert view.offsets_topic == "props-offsets"
    assert view.cluster == KafkaEndpoint("west1:9092", "west")
    assert view.exactly_once


def test_worker_view_without_settings() -> None:
    view = worker_view(None, None, {"bootstrap.servers": "h:1"})
    assert view.cluster == KafkaEndpoint("h:1")
    assert view.offsets_topic == "connect-offsets"
    assert worker_view(None, None).cluster is None


def test_endpoint_for_matches_alias_by_any_server(settings: Settings) -> None:
    assert endpoint_for("EAST2:9092", settings) == KafkaEndpoint("east1:9092,east2:9092", "east")
    assert endpoint_for(" west1:9092 ,other:1", settings).alias == "west"
    assert endpoint_for("nowhere:9092", settings) == KafkaEndpoint("nowhere:9092")
    assert endpoint_for("east1:9092", None) == KafkaEndpoint("east1:9092")


def test_endpoint_client_config(settings: Settings) -> None:
    assert KafkaEndpoint("east1:9092", "east").client_config(settings)["bootstrap.servers"] == (
        "east1:9092,east2:9092"
    )
    assert KafkaEndpoint("x:1").client_config(settings) == {"bootstrap.servers": "x:1"}
    assert KafkaEndpoint("x:1", "east").client_config(None) == {"bootstrap.servers": "x:1"}


# -- sinks ----------------------------------------------------------------------------------------


def test_sink_default_group(worker: WorkerView, settings: Settings) -> None:
    loc = resolve_location("my-sink", {}, ConnectorKind.SINK, worker, settings)
    assert loc.sink_group == "connect-my-sink"
    assert loc.data_cluster == worker.cluster
    assert loc.offsets_topics == ()
    assert loc.describe() == "consumer group connect-my-sink on main (k1:9092,k2:9092)"


def test_sink_group_from_worker_consumer_group_id(settings: Settings) -> None:
    view = worker_view(settings, "local", {"consumer.group.id": "shared-group"})
    loc = resolve_location("my-sink", {}, ConnectorKind.SINK, view, settings)
    assert loc.sink_group == "shared-group"


def test_sink_group_override_wins(settings: Settings) -> None:
    view = worker_view(settings, "local", {"consumer.group.id": "shared-group"})
    config = {"consumer.override.group.id": "mine"}
    loc = resolve_location("my-sink", config, ConnectorKind.SINK, view, settings)
    assert loc.sink_group == "mine"


def test_sink_consumer_cluster_from_override(worker: WorkerView, settings: Settings) -> None:
    config = {"consumer.override.bootstrap.servers": "west1:9092"}
    loc = resolve_location("s", config, ConnectorKind.SINK, worker, settings)
    assert loc.data_cluster == KafkaEndpoint("west1:9092", "west")
    unknown = {"consumer.override.bootstrap.servers": "other:9092"}
    loc = resolve_location("s", unknown, ConnectorKind.SINK, worker, settings)
    assert loc.data_cluster == KafkaEndpoint("other:9092")
    assert loc.describe() == "consumer group connect-s on other:9092"


def test_sink_on_unknown_cluster_describes_it() -> None:
    loc = resolve_location("s", {}, ConnectorKind.SINK, WorkerView(None))
    assert loc.describe() == "consumer group connect-s on an unknown cluster"


# -- sources --------------------------------------------------------------------------------------


def test_source_uses_worker_topic(worker: WorkerView, settings: Settings) -> None:
    loc = resolve_location("src", {}, ConnectorKind.SOURCE, worker, settings)
    assert loc.offsets_topics == (("local-offsets", worker.cluster),)
    assert loc.sink_group is None
    assert loc.data_cluster is None
    assert not loc.exactly_once


def test_source_connector_topic_on_producer_cluster_comes_first(
    worker: WorkerView, settings: Settings
) -> None:
    config = {
        "offsets.storage.topic": "src-offsets",
        "producer.override.bootstrap.servers": "east1:9092",
    }
    loc = resolve_location("src", config, ConnectorKind.SOURCE, worker, settings)
    assert loc.offsets_topics == (
        ("src-offsets", KafkaEndpoint("east1:9092,east2:9092", "east")),
        ("local-offsets", worker.cluster),
    )
    assert loc.describe() == (
        "offsets topic src-offsets on east (east1:9092,east2:9092), "
        "local-offsets on main (k1:9092,k2:9092)"
    )


def test_source_connector_topic_without_producer_override(
    worker: WorkerView, settings: Settings
) -> None:
    config = {"offsets.storage.topic": "src-offsets"}
    loc = resolve_location("src", config, ConnectorKind.SOURCE, worker, settings)
    assert loc.offsets_topics == (
        ("src-offsets", worker.cluster),
        ("local-offsets", worker.cluster),
    )


def test_source_exactly_once_flag(settings: Settings) -> None:
    view = worker_view(settings, "local", {"exactly.once.source.support": "enabled"})
    loc = resolve_location("src", {}, ConnectorKind.SOURCE, view, settings)
    assert loc.exactly_once
    assert loc.describe().endswith("(exactly-once: transactional writes)")


def test_exactly_once_producer_override_uses_worker_topic_name_on_producer_cluster(
    settings: Settings,
) -> None:
    view = worker_view(settings, "local", {"exactly.once.source.support": "enabled"})
    config = {"producer.override.bootstrap.servers": "east1:9092"}
    loc = resolve_location("src", config, ConnectorKind.SOURCE, view, settings)
    assert loc.offsets_topics == (
        ("local-offsets", KafkaEndpoint("east1:9092,east2:9092", "east")),
        ("local-offsets", view.cluster),
    )


def test_source_without_worker_cluster() -> None:
    loc = resolve_location("src", {}, ConnectorKind.SOURCE, WorkerView(None))
    assert loc.offsets_topics == (("connect-offsets", None),)
    assert loc.describe() == "offsets topic connect-offsets on the worker cluster"


# -- MirrorMaker 2 --------------------------------------------------------------------------------


def test_mm2_source_cluster_from_alias(worker: WorkerView, settings: Settings) -> None:
    config = {
        "source.cluster.alias": "east",
        "source.cluster.bootstrap.servers": "ignored:1",
    }
    loc = resolve_location(
        "east->main.MirrorSourceConnector", config, ConnectorKind.MIRROR_SOURCE, worker, settings
    )
    assert loc.data_cluster == KafkaEndpoint("east1:9092,east2:9092", "east")
    assert loc.offsets_topics == (("local-offsets", worker.cluster),)


def test_mm2_source_cluster_from_bootstrap(worker: WorkerView, settings: Settings) -> None:
    # The alias in the MM2 config is not an offsetd alias, but its servers are.
    config = {"source.cluster.alias": "dc1", "source.cluster.bootstrap.servers": "west1:9092"}
    loc = resolve_location("m", config, ConnectorKind.MIRROR_SOURCE, worker, settings)
    assert loc.data_cluster == KafkaEndpoint("west1:9092", "west")
    config = {"source.cluster.alias": "dc1", "source.cluster.bootstrap.servers": "far:9092"}
    loc = resolve_location("m", config, ConnectorKind.MIRROR_SOURCE, worker, settings)
    assert loc.data_cluster == KafkaEndpoint("far:9092")


def test_mm2_source_alias_defaults_to_source(worker: WorkerView) -> None:
    settings = Settings.model_validate(
        {
            "kafka_clusters": {
                "main": {"bootstrap_servers": "k1:9092"},
                "source": {"bootstrap_servers": "s1:9092"},
            }
        }
    )
    loc = resolve_location("m", {}, ConnectorKind.MIRROR_SOURCE, worker, settings)
    assert loc.data_cluster == KafkaEndpoint("s1:9092", "source")


def test_mm2_source_cluster_unknown_is_a_config_error(
    worker: WorkerView, settings: Settings
) -> None:
    with pytest.raises(ConfigError, match=r"'dc9'.*source\.cluster\.bootstrap\.servers"):
        resolve_location(
            "m", {"source.cluster.alias": "dc9"}, ConnectorKind.MIRROR_SOURCE, worker, settings
        )


# -- parse_properties -----------------------------------------------------------------------------


def test_parse_properties_basics() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "\n"
        "bootstrap.servers=k1:9092,k2:9092\n"
        "group.id : connect-cluster\n"
        "   offset.storage.topic =  my-offsets  \n"
        "url=http://host:8083/path\n"
        "empty=\n"
        "flag\n"
    )
    assert parse_properties(text) == {
        "bootstrap.servers": "k1:9092,k2:9092",
        "group.id": "connect-cluster",
        "offset.storage.topic": "my-offsets",
        "url": "http://host:8083/path",
        "empty": "",
        "flag": "",
    }


def test_parse_properties_colon_separator_first_wins() -> None:
    assert parse_properties("a:b=c\nx=y:z\n") == {"a": "b=c", "x": "y:z"}


def test_parse_properties_continuation_lines() -> None:
    text = "plugin.path=/a,\\\n    /b,\\\n\t/c\nnext=1\n"
    assert parse_properties(text) == {"plugin.path": "/a,/b,/c", "next": "1"}


def test_parse_properties_continuation_of_comment_like_text() -> None:
    # A continued line starting with '#' is part of the value, not a comment.
    assert parse_properties("a=x\\\n#y\n") == {"a": "x#y"}


def test_parse_properties_escaped_backslash_is_not_continuation() -> None:
    # Java unescapes `\\\\` to one backslash, which then does not continue the line.
    assert parse_properties("path=C:\\\\\nnext=1\n") == {"path": "C:\\", "next": "1"}


def test_parse_properties_later_key_wins() -> None:
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_parse_properties_whitespace_separator() -> None:
    assert parse_properties("group.id connect-cluster\n") == {"group.id": "connect-cluster"}


def test_parse_properties_continuation_on_last_line() -> None:
    assert parse_properties("a=b\\") == {"a": "b"}
