#!/usr/bin/env bash
# `make k8s-crds`: the pinned CRDs the offline validation needs, for clones without ../shared/k8s-crds.
# Usage: fetch_crds.sh DEST STRIMZI_VERSION SPARK_OPERATOR_VERSION
set -euo pipefail
dest=$1 strimzi=$2 spark=$3 prom=v0.93.0
mkdir -p "$dest/strimzi-$strimzi" "$dest/spark-operator-$spark" "$dest/prometheus-operator-${prom#v}"
get() { echo "  $2"; curl -fsSL -o "$1" "$2"; }
base=https://raw.githubusercontent.com/strimzi/strimzi-kafka-operator/$strimzi/install/cluster-operator
for f in 040-Crd-kafka 041-Crd-kafkaconnect 043-Crd-kafkatopic 044-Crd-kafkauser 045-Crd-kafkanodepool 047-Crd-kafkaconnector; do
  get "$dest/strimzi-$strimzi/$f.yaml" "$base/$f.yaml"; done
base=https://raw.githubusercontent.com/kubeflow/spark-operator/v$spark/charts/spark-operator-chart/crds
for f in sparkoperator.k8s.io_sparkapplications sparkoperator.k8s.io_scheduledsparkapplications; do
  get "$dest/spark-operator-$spark/$f.yaml" "$base/$f.yaml"; done
base=https://raw.githubusercontent.com/prometheus-operator/prometheus-operator/$prom/example/prometheus-operator-crd
for f in monitoring.coreos.com_podmonitors monitoring.coreos.com_prometheusrules monitoring.coreos.com_servicemonitors; do
  get "$dest/prometheus-operator-${prom#v}/$f.yaml" "$base/$f.yaml"; done
echo "CRDs in $dest (the k8s tests find them there)"
