"""A broker's bare "not authorized" becomes the ACL to grant, and nothing else does."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from offsetd.errors import KafkaAccessDenied
from offsetd.kafkaaccess import DENIED, denied, is_denied, raise_if_denied

CONF = {
    "bootstrap.servers": "10.0.0.7:9093",
    "sasl.username": "offsetd",
    "sasl.password": "s3cret-never-shown",
}


def test_a_topic_denial_names_the_operation_topic_principal_and_cluster() -> None:
    error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    found = denied(error, CONF, topic=("WRITE", "connect-offsets"), group=("READ", "g"))
    assert isinstance(found, KafkaAccessDenied)
    assert found.exit_code == 58
    text = str(found)
    assert text.startswith(DENIED)
    assert "User:offsetd needs WRITE on topic 'connect-offsets'" in text
    assert "group" not in text  # the code says which resource was refused
    assert "10.0.0.7:9093" in text
    assert "s3cret" not in text


def test_a_group_denial_inside_an_exception_names_the_group() -> None:
    exc = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    found = denied(exc, CONF, topic=("READ", "t"), group=("DELETE", "connect-sink"))
    assert "DELETE on group 'connect-sink'" in str(found)
    assert "topic" not in str(found).split("needs")[1].split("on Kafka")[0]


def test_a_denial_that_does_not_say_which_names_every_resource_given() -> None:
    text = "Authorization failed."  # CreateTopics' wording
    found = denied(text, CONF, topic=("CREATE", "offsetd.control"))
    assert "CREATE on topic 'offsetd.control'" in str(found)


def test_a_delivery_report_text_is_recognised() -> None:
    assert is_denied("Broker: Topic authorization failed")
    assert is_denied("LISTCONSUMERGROUPOFFSETS ... Broker: Group authorization failed")


@pytest.mark.parametrize(
    "error",
    [
        KafkaError(KafkaError._TRANSPORT),
        KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
        "Broker: Not leader for partition",
        None,
    ],
)
def test_other_errors_are_left_alone(error: object) -> None:
    assert denied(error, CONF, topic=("READ", "t")) is None
    raise_if_denied(error, CONF, topic=("READ", "t"))  # does not raise


def test_an_anonymous_client_is_named_as_such() -> None:
    found = denied(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED), {}, cluster="CREATE")
    assert "User:ANONYMOUS needs CREATE on the cluster" in str(found)
