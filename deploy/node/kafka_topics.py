"""`python -m deploy.node.kafka_topics`: the topics, on the one-node cluster's Kafka stand-in.

On kind, Strimzi's topic operator creates the topics from the KafkaTopic resources, which
``deploy.k8s.generate`` writes from the settings' topics and their configs. The stand-in has no
operator, so this Job creates the same topics from the same settings, then returns once each has a
leader; it runs again harmlessly (existing topics are left as they are).
"""

from __future__ import annotations

import sys

from lakehouse import kafka_clients
from lakehouse.settings import load_settings


def main() -> int:
    settings = load_settings()
    client = kafka_clients.admin(settings.kafka.bootstrap, {"socket.timeout.ms": 5000})
    created = kafka_clients.create_topics(client, settings.topics(), settings.topic_configs())
    print(f"topics: {len(settings.topics())} present, {len(created)} created now ({', '.join(created) or 'none'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
