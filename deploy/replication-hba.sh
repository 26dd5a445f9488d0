#!/bin/sh
# Run once by the postgres image when it initialises the primary's data directory
# (/docker-entrypoint-initdb.d): the streaming standby (docker-compose.yml, db-replica) may
# connect for replication as the database's user, with its password.
set -eu
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "$PGDATA/pg_hba.conf"
