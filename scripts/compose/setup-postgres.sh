#!/bin/sh
# Creates Temporal's two databases in the compose file's PostgreSQL and brings
# their schemas to the latest version shipped in the admin-tools image. Run by
# the temporal-admin-tools service of docker-compose.yml; every step is
# idempotent, so it runs again harmlessly on each `docker compose up`.
#
# temporal-sql-tool reads SQL_PLUGIN, SQL_HOST, SQL_PORT, SQL_USER and
# SQL_PASSWORD from the environment.
set -eu

SCHEMA=/etc/temporal/schema/postgresql/v12
for db in temporal temporal_visibility; do
	case $db in
	temporal) dir=$SCHEMA/temporal/versioned ;;
	*) dir=$SCHEMA/visibility/versioned ;;
	esac
	echo "setup-postgres: database $db"
	temporal-sql-tool --db "$db" create-database
	temporal-sql-tool --db "$db" setup-schema -v 0.0
	temporal-sql-tool --db "$db" update-schema -d "$dir"
done
echo "setup-postgres: schemas up to date"
