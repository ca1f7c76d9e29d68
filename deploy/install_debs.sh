#!/usr/bin/env bash
# Install Debian packages, only those that are missing: the local stack's by default, or the ones
# named as arguments (`make up-node` names the node's: containerd, runc, the CNI plugins, ...).
# The servers are started as our own processes (`lakehouse stack up`, `python -m deploy.node up`),
# never as system services.
set -euo pipefail
wanted=(mariadb-server prometheus postgresql openjdk-17-jre-headless openjdk-17-jdk-headless maven gcc libc6-dev)
if [ $# -gt 0 ]; then wanted=("$@"); fi
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "  debian packages present: ${wanted[*]}"
  exit 0
fi
echo "  installing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
# Keep package scripts from starting system-wide servers on their default ports.
export DEBIAN_FRONTEND=noninteractive RUNLEVEL=1
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
