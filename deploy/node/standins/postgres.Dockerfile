# Stand-in for postgres:16.6 on the one-node cluster: Debian 12's PostgreSQL 15, with an entrypoint
# that honours what the StatefulSet gives the official image (POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB, PGDATA; uid 999). The metastore's schema is the same on 15 and 16.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN groupmod --gid 999 postgres && usermod --uid 999 --gid 999 postgres
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV PATH=/usr/lib/postgresql/15/bin:$PATH
USER 999
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
