#!/bin/bash
# Graceful executor decommissioning (spark.decommission.enabled): the pod's preStop hook runs
# /opt/decom.sh; the executor JVM migrates its blocks on SIGPWR, then this waits for it to exit.
set -uo pipefail
pid=$(pgrep -f KubernetesExecutorBackend | head -n 1)
[ -n "$pid" ] || exit 0
kill -s PWR "$pid"
while kill -0 "$pid" 2>/dev/null; do sleep 1; done
