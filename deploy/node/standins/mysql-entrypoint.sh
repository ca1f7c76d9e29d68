#!/bin/bash
# MySQL 8 options MariaDB does not know (gtid_mode, enforce_gtid_consistency) are passed as
# "loose-" options, which MariaDB skips with a warning and MySQL would apply.
set -euo pipefail
datadir=/var/lib/mysql socket=/var/run/mysqld/mysqld.sock options=/tmp/my.cnf
{
  # MySQL 8's default character set; MariaDB's would be latin1
  printf '[mysqld]\ndatadir=%s\nsocket=%s\ncharacter-set-server=utf8mb4\ncollation-server=utf8mb4_general_ci\n' "$datadir" "$socket"
  for file in /etc/mysql/conf.d/*.cnf; do
    [ -e "$file" ] || continue
    sed -E 's/^([A-Za-z_][A-Za-z0-9_-]*)([[:space:]]*(=|$))/loose-\1\2/' "$file"
  done
  printf '[client]\nsocket=%s\n' "$socket"
} > "$options"

docker_process_sql() {  # SQL on stdin, as root over the socket, in MYSQL_DATABASE when set
  mariadb --defaults-file="$options" -uroot ${MYSQL_DATABASE:+--database="$MYSQL_DATABASE"}
}

if [ ! -d "$datadir/mysql" ]; then
  mariadb-install-db --defaults-file="$options" --auth-root-authentication-method=normal --skip-test-db >/dev/null
  mariadbd --defaults-file="$options" --skip-networking &
  for _ in $(seq 120); do mariadb-admin --defaults-file="$options" -uroot ping --silent 2>/dev/null && break; sleep 0.5; done
  mariadb --defaults-file="$options" -uroot <<SQL
ALTER USER 'root'@'localhost' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD:?}';
CREATE USER 'root'@'%' IDENTIFIED BY '${MYSQL_ROOT_PASSWORD}';
GRANT ALL ON *.* TO 'root'@'%' WITH GRANT OPTION;
${MYSQL_DATABASE:+CREATE DATABASE IF NOT EXISTS \`$MYSQL_DATABASE\`;}
SQL
  printf '[client]\nuser=root\npassword=%s\n' "$MYSQL_ROOT_PASSWORD" >> "$options"
  for file in /docker-entrypoint-initdb.d/*; do
    case "$file" in
      *.sql) docker_process_sql < "$file" ;;
      *.sh) . "$file" ;;
    esac
  done
  mariadb-admin --defaults-file="$options" shutdown
  wait
fi
exec mariadbd --defaults-file="$options" "$@"
