# Stand-in for mysql:8.4.3 on the one-node cluster: Debian 12's MariaDB 10.11 (the same binlog
# protocol the capture reads by file and position), with an entrypoint that honours what the
# StatefulSet gives the official image: MYSQL_ROOT_PASSWORD, MYSQL_DATABASE, the options files in
# /etc/mysql/conf.d, and the init scripts in /docker-entrypoint-initdb.d (.sql, and .sh sourced
# with docker_process_sql defined); uid 999.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN groupmod --gid 999 mysql && usermod --uid 999 --gid 999 mysql
COPY mysql-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER 999
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
