#!/bin/sh
# The read replica of docker-compose.yml (db-replica): on its first start, a base backup of the
# primary (db) written with its recovery settings (-R: standby.signal and primary_conninfo),
# then PostgreSQL as a hot standby streaming from it. The postgres image's entrypoint hands the
# data directory to the postgres user and starts the server as that user.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  until pg_isready -h db -U "$POSTGRES_USER" -d "$POSTGRES_DB"; do sleep 1; done
  PGPASSWORD="$POSTGRES_PASSWORD" pg_basebackup -h db -U "$POSTGRES_USER" -D "$PGDATA" \
    -R -X stream --checkpoint=fast
fi
# hot_standby_feedback: a long export on the replica neither holds back nor is cancelled by
# the primary's vacuum (docs/operations.md, *Read replicas*)
exec docker-entrypoint.sh postgres -c hot_standby=on -c hot_standby_feedback=on
