#!/usr/bin/env bash
# `make up`: the lakehouse on a kind cluster, step by step, each step idempotent.
# Usage: up.sh CLUSTER NAMESPACE IMAGE_NAME STRIMZI_VERSION SPARK_OPERATOR_VERSION
# DRY_RUN=1 prints every command that changes the cluster or the image, in order, and runs none
# (`make up DRY_RUN=1`; tests/deploy/k8s/test_up_order.py reads that order).
# TARGET=node runs the same steps on the one-node cluster of this machine (`make up-node`, deploy/node),
# where no registry is reachable; only these differ, each a function or a flag below: creating the
# cluster, loading images, the Dockerfiles' base images, Strimzi (a Kafka stand-in and its own wait)
# and spark-operator's chart (the one inside its Go module, same version).
set -euo pipefail
cluster=$1 ns=$2 image_name=$3 strimzi=$4 spark_operator=$5
target=${TARGET:-kind}
cd "$(dirname "$0")/../.."
node() { .venv/bin/python -m deploy.node "$@"; }
if [ "$target" = node ] && [ -z "${LAKEHOUSE_NODE_INSIDE:-}" ]; then
  # Everything after this runs inside the node's namespaces, where its API server's address is.
  printf '\n==> %s\n' "one-node cluster '$cluster' (deploy/node)"
  if [ "${DRY_RUN:-}" = 1 ]; then
    printf '+ .venv/bin/python -m deploy.node %s\n' up standins "build-args lakehouse" "build-args operator" \
      "exec -- (the steps below)" >&2
  else
    node up
    # Built here, on the host's network (debootstrap reaches Debian's mirror; inside the node nothing does):
    # the stand-ins, and the base images both Dockerfiles are given below (inside, they are found built).
    mkdir -p .run && node standins > .run/node-standins.yaml
    node build-args lakehouse > /dev/null
    node build-args operator > /dev/null
    exec .venv/bin/python -m deploy.node exec -- env LAKEHOUSE_NODE_INSIDE=1 bash "$0" "$@"
  fi
fi
# The image is tagged by its content (every file the Dockerfile copies): after a change, a new tag
# makes kind hold the new image and every workload roll; the same tree gives the same tag. Python computes
# it (deploy/k8s/image_tag.py): stock macOS has no sha256sum.
tag=$(.venv/bin/python -m deploy.k8s.image_tag)
image="$image_name:$tag"
if [ "$target" = node ]; then context=$(node name); else context="kind-$cluster"; fi
kubectl=(kubectl --context "$context")
step() { printf '\n==> %s\n' "$*"; }
# `kind load docker-image` fails for some images under Docker's containerd image store (Docker 29's default;
# kind issues 3795 and 4247): an archive saved by Docker loads the same way with either store.
load_into_kind() {
  mkdir -p .run && local archive=".run/kind-load-${1//[:\/]/_}.tar"
  run docker save -o "$archive" "$1"
  run kind load image-archive "$archive" --name "$cluster"
  run rm -f "$archive"
}
run() { if [ "${DRY_RUN:-}" = 1 ]; then printf '+ %s\n' "$*" >&2; else "$@"; fi; }
load_image() { if [ "$target" = node ]; then run node load "$1"; else load_into_kind "$1"; fi; }
# The flags that put a Dockerfile on the node's stand-in bases (none on kind: the official images), one per
# line, into the array named $2. An assignment from a command fails the script when the command fails
# (read through a process substitution, a failure would go unseen: the build would pull from a registry).
base_image_flags() {
  local -n into=$2; into=()
  if [ "$target" = node ] && [ "${DRY_RUN:-}" != 1 ]; then
    local flags; flags=$(node build-args "$1")
    mapfile -t into <<< "$flags"
  fi
}

step "checking tools"
if [ "${DRY_RUN:-}" != 1 ]; then
missing=()
tools=(docker kind kubectl helm)
[ "$target" = node ] && tools=(docker kubectl helm)
for tool in "${tools[@]}"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "error: missing ${missing[*]}. Install: docker (https://docs.docker.com/engine/install/)," \
       "kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)," \
       "kubectl (https://kubernetes.io/docs/tasks/tools/), helm (https://helm.sh/docs/intro/install/)." >&2
  exit 1
fi
docker info >/dev/null 2>&1 || { echo "error: docker is installed but its daemon does not answer (is it running?)" >&2; exit 1; }
fi

if [ "$target" = kind ]; then
step "kind cluster '$cluster'"
if [ "${DRY_RUN:-}" != 1 ] && kind get clusters 2>/dev/null | grep -qx "$cluster"; then echo "exists"; else
  run kind create cluster --config k8s/kind-cluster.yaml --name "$cluster" --wait 120s; fi
fi

step "generated manifests up to date"
.venv/bin/python -m deploy.k8s.generate --check || {
  echo "error: k8s/base/generated is stale: run \`make k8s-generate\` and commit it" >&2; exit 1; }

# The operators' charts put RoleBindings and ServiceAccounts into the lakehouse namespace (watchNamespaces,
# spark.jobNamespaces): it must exist first, with its Pod Security labels, before either chart is installed.
step "namespace $ns (restricted Pod Security) before the operators that watch it"
run "${kubectl[@]}" apply -f k8s/base/namespace.yaml

step "operators: Strimzi $strimzi, spark-operator $spark_operator (helm, pinned)"
if [ "$target" = kind ]; then
# Strimzi's default pod security provider leaves the pods it creates (brokers, entity operator) without
# the security context a restricted namespace demands; its restricted provider sets them.
run helm upgrade --install strimzi oci://quay.io/strimzi-helm/strimzi-kafka-operator --version "$strimzi" \
  --kube-context "$context" --namespace strimzi --create-namespace \
  --set "watchNamespaces={$ns}" \
  --set "extraEnvs[0].name=STRIMZI_POD_SECURITY_PROVIDER_CLASS" --set "extraEnvs[0].value=restricted" \
  --set resources.requests.cpu=100m --set resources.requests.memory=384Mi --wait
else
  echo "Strimzi's operator is in no registry reachable here: the node overlay runs a Kafka stand-in"
fi
# The operator submits with the spark-submit of its image: this one is built on Spark 4.1.4, as the jobs are.
operator_image="lakehouse-spark-operator:$spark_operator-$(.venv/bin/python -m deploy.k8s.image_tag --dockerfile deploy/k8s/spark-operator.Dockerfile)"
base_image_flags operator operator_flags
run docker build "${operator_flags[@]}" -f deploy/k8s/spark-operator.Dockerfile --build-arg "OPERATOR_VERSION=$spark_operator" \
  -t "$operator_image" deploy/k8s
load_image "$operator_image"
if [ "$target" = node ]; then
  chart=$(run node chart)
else
  chart=spark-operator/spark-operator
  run helm repo add spark-operator https://kubeflow.github.io/spark-operator >/dev/null 2>&1 || true
  run helm repo update spark-operator >/dev/null
fi
run helm upgrade --install spark-operator "${chart:-spark-operator/spark-operator}" --version "$spark_operator" \
  --kube-context "$context" --namespace spark-operator --create-namespace \
  --set "spark.jobNamespaces={$ns}" --set webhook.enable=true \
  --set image.registry=docker.io --set "image.repository=library/${operator_image%%:*}" \
  --set "image.tag=${operator_image#*:}" --set image.pullPolicy=IfNotPresent \
  --set controller.resources.requests.cpu=50m --set controller.resources.requests.memory=128Mi \
  --set webhook.resources.requests.cpu=50m --set webhook.resources.requests.memory=64Mi --wait

step "image $image (built from deploy/Dockerfile, loaded into the $target cluster)"
base_image_flags lakehouse image_flags
run docker build "${image_flags[@]}" -f deploy/Dockerfile -t "$image" .
load_image "$image"

step "credentials (k8s/overlays/kind/credentials.env, 0600, never committed)"
run .venv/bin/python -m deploy.k8s.secrets

step "namespace and storage (the $target overlay with image $image)"
# A kustomization of its own names the content tag, so the committed overlay never changes with it.
# The API server is no pod: its egress policy names its endpoints' addresses, read from this cluster.
api_server=$(run "${kubectl[@]}" get endpointslices -n default -l kubernetes.io/service-name=kubernetes \
  -o 'jsonpath={.items[*].endpoints[*].addresses[*]}')
overlay=.run/k8s-up
mkdir -p "$overlay"
standins=""
if [ "$target" = node ] && [ "${DRY_RUN:-}" != 1 ]; then standins=$(cat .run/node-standins.yaml); fi
{
  printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../../k8s/overlays/%s]\n' "$target"
  printf 'images:\n  - {name: %s, newName: %s, newTag: "%s"}\n' "$image_name" "$image_name" "$tag"
  [ -n "$standins" ] && printf '%s\n' "$standins"
  if [ -n "${api_server:-}" ]; then
    printf 'patches:\n  - target: {kind: NetworkPolicy, name: allow-api-server-egress}\n    patch: |-\n'
    printf '      - {op: replace, path: /spec/egress/0/to, value: [%s]}\n' \
      "$(for ip in $api_server; do printf '{ipBlock: {cidr: %s/32}},' "$ip"; done | sed 's/,$//')"
  fi
} > "$overlay/kustomization.yaml"
# A Job's pod template cannot change once created: the bucket Job of an earlier image goes first (it is idempotent).
run "${kubectl[@]}" -n "$ns" delete job create-bucket --ignore-not-found
[ "$target" = node ] && run "${kubectl[@]}" -n "$ns" delete job kafka-topics --ignore-not-found
if [ "$target" = node ]; then
  # The same manifests, their CPU requests scaled to the node's two cores (deploy/node/sizing.py).
  run "${kubectl[@]}" kustomize "$overlay" | run .venv/bin/python -m deploy.node.sizing \
    | run "${kubectl[@]}" apply --server-side -f - --force-conflicts >/dev/null
else
  run "${kubectl[@]}" apply --server-side -k "$overlay" --force-conflicts >/dev/null
fi
wait_for() { # kind selector-or-name timeout
  echo "waiting for $1 $2"; run "${kubectl[@]}" -n "$ns" wait --for=condition="$4" "$1" $2 --timeout="$3"; }
run "${kubectl[@]}" -n "$ns" rollout status statefulset/minio --timeout=300s
run "${kubectl[@]}" -n "$ns" rollout status statefulset/postgres --timeout=300s
run "${kubectl[@]}" -n "$ns" rollout status statefulset/mysql --timeout=300s
wait_for job create-bucket 300s complete

step "Kafka and topics"
if [ "$target" = node ]; then
  run "${kubectl[@]}" -n "$ns" rollout status statefulset/lakehouse-kafka --timeout=300s
  wait_for job kafka-topics 300s complete
else
  wait_for kafka lakehouse 600s Ready
  run "${kubectl[@]}" -n "$ns" wait --for=condition=Ready kafkatopic --all --timeout=300s
fi

step "catalog and query engine"
for d in hive-metastore trino-coordinator; do
  run "${kubectl[@]}" -n "$ns" rollout status "deployment/$d" --timeout=600s; done

step "pipeline, CDC, observability, load generator"
dashboards=grafana
[ "$target" = node ] && dashboards=""  # no Grafana server in any registry reachable here
for d in cdc-capture freshness-probe prometheus $dashboards locust-master locust-worker; do
  run "${kubectl[@]}" -n "$ns" rollout status "deployment/$d" --timeout=600s; done
for app in pipeline; do
  echo "waiting for SparkApplication $app to run"
  run "${kubectl[@]}" -n "$ns" wait --for=jsonpath='{.status.applicationState.state}'=RUNNING \
    "sparkapplication/$app" --timeout=600s
done

step "end to end: a bounded load through Locust, then Trino must count every event"
# deploy/k8s/end_to_end.py: every wait bounded, a failed count retried and then a failure, the delivered figure
# from the click topic's end offsets, the Trino CLI at a small heap beside the coordinator.
run .venv/bin/python -m deploy.k8s.end_to_end --context "$context" --namespace "$ns" --rate 200 --duration 30s

if [ "$target" = node ]; then
cat <<MSG

The lakehouse is up on the one-node cluster '$context' (namespace $ns), inside its own network
namespace: reach it through python -m deploy.node (kubectl, or exec -- ANY COMMAND), e.g.
  Pods        .venv/bin/python -m deploy.node kubectl -n $ns get pods
  Trino       .venv/bin/python -m deploy.node kubectl -n $ns exec -it deploy/trino-coordinator -- trino --catalog iceberg
  Memory      .venv/bin/python -m deploy.node usage
Tear down: make down-node (the node's data stays in .run/node)
MSG
exit 0
fi
cat <<MSG

The lakehouse is up on kind cluster '$cluster' (namespace $ns). Nothing is exposed beyond
your machine; open a tunnel for what you want to see:
  Grafana     ${kubectl[*]} -n $ns port-forward svc/grafana 3000:3000        -> http://127.0.0.1:3000
  Prometheus  ${kubectl[*]} -n $ns port-forward svc/prometheus 9090:9090     -> http://127.0.0.1:9090
  Locust UI   ${kubectl[*]} -n $ns port-forward svc/locust-master 8089:8089  -> http://127.0.0.1:8089
  Trino       make trino    (or port-forward svc/trino 8080:8080)
Load:   make load RATE=2000 DURATION=60s        Status: make status        Tear down: make down
MSG
