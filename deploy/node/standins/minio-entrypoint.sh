#!/bin/bash
# server DIR [--address [HOST]:PORT] [--console-address ...]: the S3 API on PORT (9000), data in DIR.
# SeaweedFS's servers (all in this pod) find each other at 127.0.0.1: an address the data directory may
# record that stays right when the pod comes back with another IP; clients reach only the S3 port.
set -euo pipefail
[ "${1:-}" = server ] || { echo "usage: server DIR [--address :PORT]" >&2; exit 2; }
dir=$2 port=9000
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    --address) port=${2##*:}; shift 2 ;;
    *) shift ;;
  esac
done
mkdir -p "$dir/seaweedfs"
identity=$dir/seaweedfs/s3.json
umask 077
printf '{"identities":[{"name":"root","credentials":[{"accessKey":"%s","secretKey":"%s"}],"actions":["Admin","Read","Write","List","Tagging"]}]}\n' \
  "${MINIO_ROOT_USER:?}" "${MINIO_ROOT_PASSWORD:?}" > "$identity"
# The root filesystem is read-only: SeaweedFS's logs and local sockets go under DIR too.
mkdir -p "$dir/seaweedfs/tmp"
export HOME=$dir TMPDIR=$dir/seaweedfs/tmp
exec /usr/local/bin/weed mini -dir="$dir/seaweedfs" -ip=127.0.0.1 -ip.bind=0.0.0.0 \
  -s3.port="$port" -s3.config="$identity" -s3.port.iceberg=0 -s3.port.lance=0 -webdav=false -admin.ui=false \
  -master.telemetry=false
