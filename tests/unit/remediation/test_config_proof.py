"""When the configuration a sink runs with last changed, from its retained versions (pure)."""

from __future__ import annotations

from offsetd.remediation.config_proof import ConfigHistory, history_of

JSON = {"value.converter": "org.apache.kafka.connect.json.JsonConverter", "topics": "t"}
AVRO = {**JSON, "value.converter": "io.confluent.connect.avro.AvroConverter"}


def test_a_connector_never_reconfigured_is_as_old_as_its_first_version() -> None:
    assert history_of([(100, JSON)]) == ConfigHistory(100, unchanged=True)


def test_locating_with_one_record_batches_and_putting_it_back_changes_nothing() -> None:
    located = {**JSON, "consumer.override.max.poll.records": "1"}
    assert history_of([(100, JSON), (200, located), (300, JSON)]) == ConfigHistory(
        100, unchanged=True
    )


def test_a_new_converter_is_a_change() -> None:
    assert history_of([(100, JSON), (200, AVRO)]) == ConfigHistory(200, unchanged=False)
    # changed and changed back: the last change counts
    assert history_of([(100, JSON), (200, AVRO), (300, JSON)]) == ConfigHistory(
        300, unchanged=False
    )


def test_deleted_and_created_again_is_a_change() -> None:
    assert history_of([(100, JSON), (200, None), (300, JSON)]) == ConfigHistory(
        300, unchanged=False
    )


def test_no_version_no_history() -> None:
    assert history_of([]) is None
