"""Tansu, the Kafka-protocol broker of the local stack.

Durable by default: the 's3' engine keeps topic data in the stack's object store, so a
broker restart loses nothing. The 'memory' engine is faster and forgets everything on
restart (LAKEHOUSE_KAFKA__STORAGE=memory); see docs/local-stack.md, 'Broker durability', for measured figures.
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from deploy.local.binaries import tool
from deploy.local.services.base import Service
from lakehouse import kafka_clients
from lakehouse.settings import Settings, secret


def admin_client(settings: Settings) -> AdminClient:
    return kafka_clients.admin(settings.kafka.bootstrap, {"socket.timeout.ms": 5000}, log_level=kafka_clients.SILENT)


class Broker(Service):
    name = "kafka"
    startup_timeout = 30.0

    def ports(self) -> dict[str, int]:
        return {"kafka": self.settings.kafka.port}

    def command(self) -> list[str]:
        k = self.settings.kafka
        url = f"tcp://{k.host}:{k.port}"
        engine = f"s3://{k.storage_bucket}/" if k.storage == "s3" else "memory://tansu/"
        return [
            str(tool(self.settings.tools_dir, "tansu")),
            "broker",
            "--listener-url", url,
            "--advertised-listener-url", url,
            "--storage-engine", engine,
        ]

    def env(self) -> dict[str, str]:
        if self.settings.kafka.storage != "s3":
            return {}
        s3 = self.settings.s3
        return {
            "AWS_ACCESS_KEY_ID": secret(s3.access_key, "s3.access_key"),
            "AWS_SECRET_ACCESS_KEY": secret(s3.secret_key, "s3.secret_key"),
            "AWS_ENDPOINT": s3.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_DEFAULT_REGION": s3.region,
            "RUST_LOG": "warn",
        }

    def ready(self) -> bool:
        try:
            admin_client(self.settings).list_topics(timeout=2)
            return True
        except KafkaException:
            return False

    def bootstrap(self) -> None:
        admin = admin_client(self.settings)
        existing = admin.list_topics(timeout=10).topics
        new = [NewTopic(name, num_partitions=n, replication_factor=1)
               for name, n in self.settings.topics().items() if name not in existing]
        if not new:
            return
        for _name, future in admin.create_topics(new, request_timeout=15).items():
            try:
                future.result()
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
