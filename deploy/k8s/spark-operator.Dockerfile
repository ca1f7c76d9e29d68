# The spark-operator's controller and webhook, submitting with Spark 4.1.4.
#
# spark-operator submits every SparkApplication with the spark-submit of its own image, and
# its images from 2.3 on carry Spark 4.0 (end of life since 2026-11-23), while the jobs are
# Spark 4.1.4 (pyspark 4.1.4 in requirements.lock). This image keeps the operator's binary and
# puts it on Apache Spark 4.1.4's image, the base of deploy/Dockerfile too: the submitter and
# the jobs are one Spark.
# `make up` builds it and loads it into kind (deploy/k8s/up.sh).
# The base images are build arguments: the one-node cluster (`make up-node`) builds this file on stand-ins
# (the operator's binary built from its Go module, Spark from PyPI; deploy/node/images.py).
ARG OPERATOR_VERSION=2.5.2
ARG OPERATOR_IMAGE=ghcr.io/kubeflow/spark-operator/controller:${OPERATOR_VERSION}
ARG SPARK_IMAGE=spark:4.1.4-scala2.13-java17-python3-ubuntu
FROM ${OPERATOR_IMAGE} AS operator

FROM ${SPARK_IMAGE}
USER root
# tini reaps the spark-submit processes the controller starts; the webhook writes its
# serving certificate into a directory its user owns.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /etc/k8s-webhook-server/serving-certs /home/spark \
    && chown -R spark:spark /etc/k8s-webhook-server/serving-certs /home/spark
COPY --from=operator /usr/bin/spark-operator /usr/bin/spark-operator
# Numeric, as upstream's operator image: the chart runs both pods with runAsNonRoot and no runAsUser, and the
# kubelet refuses a user it cannot see is non-root ("image has non-numeric user"). 185 is the base image's spark.
USER 185:185
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "/usr/bin/spark-operator"]
