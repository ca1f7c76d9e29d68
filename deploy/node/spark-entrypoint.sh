#!/bin/bash
# The Spark image's entrypoint on the one-node cluster, where Apache Spark's image (and so its
# entrypoint) is not to be had: the two modes Spark's Kubernetes backend starts pods in, and any
# other command as given.
#   driver ARGS...    spark-submit in client mode inside the driver pod, bound to the pod's address
#   executor          the executor backend, configured by the environment the driver sets on the pod
# tini (PID 1) forwards signals and reaps the JVM's children.
set -euo pipefail
: "${SPARK_HOME:=/opt/spark}"
# The configuration folders first (Spark's and Hadoop's, when the pod mounts them), then Spark's jars,
# then what the application adds: spark.executor.extraClassPath arrives as SPARK_CLASSPATH.
classpath=""
for part in "${SPARK_CONF_DIR:-}" "${HADOOP_CONF_DIR:-}" "$SPARK_HOME/jars/*" "${SPARK_EXTRA_CLASSPATH:-}" \
            "${SPARK_CLASSPATH:-}" "${SPARK_DIST_CLASSPATH:-}"; do
  [ -n "$part" ] && classpath="${classpath:+$classpath:}$part"
done
# A pod may run as a uid the image does not know (runAsUser): Hadoop's login then needs a user name.
if ! getent passwd "$(id -u)" >/dev/null; then export HADOOP_USER_NAME="${HADOOP_USER_NAME:-${SPARK_USER:-spark}}"; fi

case "${1:-}" in
  driver)
    shift
    exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:?the driver pod sets it}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    # The driver passes the executor's JVM options as SPARK_JAVA_OPT_0, _1, ... (in that order).
    java_opts=()
    while IFS='=' read -r name _; do
      java_opts+=("${!name}")
    done < <(env | grep -o '^SPARK_JAVA_OPT_[0-9]*=' | sort -t_ -k4 -n)
    exec /usr/bin/tini -s -- "${JAVA_HOME:-/usr}/bin/java" "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:?}" -Xmx"${SPARK_EXECUTOR_MEMORY}" -cp "$classpath" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:?}" --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-}" "$@"
    ;;
  *)
    exec /usr/bin/tini -s -- "$@"
    ;;
esac
