# Stand-in for Strimzi's Kafka on the one-node cluster: Apache Kafka 4.3.1 (the version the Kafka
# resource names) from Maven Central, the jars the local stack's broker runs (deploy/jvm/pom.xml,
# profile kafka), one KRaft node that is broker and controller. Strimzi's operator and images are in
# no registry reachable here.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY libs/ /opt/kafka/libs/
COPY kafka-entrypoint.sh /usr/local/bin/kafka-entrypoint.sh
USER 1001
ENTRYPOINT ["/usr/local/bin/kafka-entrypoint.sh"]
