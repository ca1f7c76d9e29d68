"""Which Kafka errors are asked again: the ones Kafka answers while a partition's leader is being elected.

librdkafka's ``retriable()`` flag is set only for errors of its transactional API, so a
NOT_LEADER_FOR_PARTITION from ListOffsets (a topic just created, a broker just restarted)
would otherwise fail a batch that a moment later would have planned fine.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from lakehouse.kafka_clients import retriable


def test_a_leader_election_is_waited_out():
    for code in (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT):
        assert retriable(KafkaException(KafkaError(code))), code


def test_a_missing_topic_or_a_refused_request_is_not():
    for code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.INVALID_REQUEST):
        assert not retriable(KafkaException(KafkaError(code))), code
