#!/bin/bash
# One KRaft node (broker and controller) with its log in KAFKA_DATA (formatted on the first start),
# advertised as KAFKA_ADVERTISED_HOST:9092; replication factors 1, as the Kafka resource sets them.
set -euo pipefail
data=${KAFKA_DATA:-/var/lib/kafka} config=/tmp/server.properties
cat > "$config" <<PROPERTIES
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:9093
listeners=PLAIN://0.0.0.0:9092,CONTROLLER://127.0.0.1:9093
advertised.listeners=PLAIN://${KAFKA_ADVERTISED_HOST:?}:9092,CONTROLLER://127.0.0.1:9093
listener.security.protocol.map=PLAIN:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAIN
controller.listener.names=CONTROLLER
log.dirs=$data/log
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
default.replication.factor=1
min.insync.replicas=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0
PROPERTIES
cat > /tmp/log4j2.properties <<'LOG'
rootLogger.level=WARN
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c)%n
LOG
java=(java -Xmx${KAFKA_HEAP:-512m} -Dlog4j2.configurationFile=/tmp/log4j2.properties -cp '/opt/kafka/libs/*')
if [ ! -f "$data/log/meta.properties" ]; then
  cluster_id=${KAFKA_CLUSTER_ID:-$("${java[@]}" kafka.tools.StorageTool random-uuid)}
  "${java[@]}" kafka.tools.StorageTool format --standalone -t "$cluster_id" -c "$config"
fi
exec "${java[@]}" kafka.Kafka "$config"
