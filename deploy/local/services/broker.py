"""Apache Kafka, the local stack's broker: one KRaft node (broker and controller) on 127.0.0.1.

The same release as the cluster's Strimzi Kafka (the ``kafka`` profile of deploy/jvm/pom.xml),
its log on disk in the stack's data folder, so a restart, or a kill -9, keeps every
acknowledged record. The node's storage is formatted once, on first start
(``StorageTool format --standalone``); later starts find it formatted and recover the log.
Topics, partitions and their configs come from the settings, as the cluster's KafkaTopic
resources do.
"""

from __future__ import annotations

import base64
import subprocess
import uuid

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from deploy.local.binaries import java_binary
from deploy.local.processes import StackError
from deploy.local.services.base import Service
from deploy.maven import pins_of, profile_dir
from lakehouse import kafka_clients
from lakehouse.settings import Settings

#: log4j2 config: the broker writes to stdout, which the stack sends to logs/kafka.log
LOG4J2 = """\
status = error
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = WARN
"""


def admin_client(settings: Settings) -> AdminClient:
    return kafka_clients.admin(settings.kafka.bootstrap, {"socket.timeout.ms": 5000}, log_level=kafka_clients.SILENT)


def server_properties(settings: Settings, log_dir: str) -> dict[str, str]:
    """A single combined node: every internal topic with one replica, new groups answered at once."""
    k = settings.kafka
    controller = f"{k.host}:{k.controller_port}"
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": controller,
        "listeners": f"PLAINTEXT://{k.host}:{k.port},CONTROLLER://{controller}",
        "advertised.listeners": f"PLAINTEXT://{k.host}:{k.port},CONTROLLER://{controller}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": log_dir,
        "num.partitions": "1",
        "auto.create.topics.enable": "false",  # topics come from the settings, never from a typo
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # topics the settings declare carry their own retention; the ones benchmarks and tests make do not,
        # and on a durable local broker they would pile up for the default week
        "log.retention.hours": "6",
    }


def new_cluster_id() -> str:
    """A random Kafka cluster id (16 bytes, URL-safe base64), never starting with "-".

    One in 64 random ids starts with "-"; the format tool then reads it as an option and fails
    ("argument --cluster-id/-t: expected one argument"). Kafka's own generator draws again too.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id

class Broker(Service):
    name = "kafka"
    startup_timeout = 60.0

    def ports(self) -> dict[str, int]:
        return {"kafka": self.settings.kafka.port, "kafka-controller": self.settings.kafka.controller_port}

    @property
    def classpath(self) -> str:
        folder = profile_dir(self.settings.tools_dir, "kafka")
        if not all((folder / name).is_file() for name in pins_of("kafka")):
            raise StackError(f"the Kafka broker's jars are missing from {folder}: run `make install` "
                             "(it resolves deploy/jvm/pom.xml's kafka profile from Maven Central)")
        return f"{folder}/*"

    @property
    def properties_path(self):
        return self.config_dir / "server.properties"

    def _java(self, main: str, *args: str, heap_mb: int) -> list[str]:
        return [str(java_binary()), f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                "-Djava.awt.headless=true",
                "-Djava.net.preferIPv4Stack=true",  # IPv4 sockets on 127.0.0.1, not IPv6 ones on ::ffff:127.0.0.1
                f"-Dlog4j2.configurationFile={self.config_dir / 'log4j2.properties'}",
                "-cp", self.classpath, main, *args]

    def prepare(self, user: str | None) -> None:
        """Write the configs from the settings (every start: a changed port takes effect); format the log once."""
        self.config_dir.mkdir(parents=True, exist_ok=True)
        props = server_properties(self.settings, str(self.data_dir / "log"))
        self.properties_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.config_dir / "log4j2.properties").write_text(LOG4J2)
        if (self.data_dir / "log" / "meta.properties").exists():
            return
        command = self._java("kafka.tools.StorageTool", "format", "--standalone", "-t", new_cluster_id(),
                             "-c", str(self.properties_path), heap_mb=256)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise StackError(f"formatting Kafka's log folder {self.data_dir / 'log'} failed:\n"
                             f"{(done.stdout + done.stderr).strip()[-1500:]}")

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.properties_path), heap_mb=self.settings.kafka.heap_mb)

    def ready(self) -> bool:
        try:
            return bool(admin_client(self.settings).list_topics(timeout=2).brokers)
        except KafkaException:
            return False

    def bootstrap(self) -> None:
        """Every topic the settings name, with its partitions and configs (``Settings.topics``)."""
        kafka_clients.create_topics(admin_client(self.settings), self.settings.topics(), self.settings.topic_configs())
