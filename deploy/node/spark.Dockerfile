# The one-node cluster's stand-in for Apache Spark's image spark:4.1.4-scala2.13-java17-python3-ubuntu,
# which no registry reachable here ships: the same layout (SPARK_HOME=/opt/spark with bin/, jars/,
# conf/, work-dir/; user spark, uid 185; the entrypoint at /opt/entrypoint.sh, executor decommissioning
# at /opt/decom.sh), with Spark's bin/ and jars/ from the pyspark release in the lock (PyPI, hash
# checked), on Debian 12 with OpenJDK 17, Python 3.11 and tini. `python -m deploy.node build-args lakehouse`
# builds it (up.sh calls it); deploy/Dockerfile stands on it there.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
# "pyspark==<version> --hash=sha256:<hash>", the line of deploy/image-requirements.lock
ARG PYSPARK_REQUIREMENT
RUN python3 -m venv /tmp/dist \
    && echo "$PYSPARK_REQUIREMENT" > /tmp/pyspark.txt \
    && /tmp/dist/bin/pip install -q --no-cache-dir --no-deps --require-hashes -r /tmp/pyspark.txt \
    && mkdir -p /opt/spark/conf /opt/spark/work-dir \
    && cp -r /tmp/dist/lib/python3.11/site-packages/pyspark/bin /tmp/dist/lib/python3.11/site-packages/pyspark/jars \
       /tmp/dist/lib/python3.11/site-packages/pyspark/sbin /opt/spark/ \
    && rm -rf /tmp/dist /tmp/pyspark.txt \
    && groupadd --gid 185 spark && useradd --uid 185 --gid 185 --home-dir /opt/spark --no-create-home spark \
    && chown spark:spark /opt/spark/work-dir
COPY spark-entrypoint.sh /opt/entrypoint.sh
COPY spark-decommission.sh /opt/decom.sh
ENV SPARK_HOME=/opt/spark JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
WORKDIR /opt/spark/work-dir
USER 185
ENTRYPOINT ["/opt/entrypoint.sh"]
