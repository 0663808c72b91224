#!/usr/bin/env bash
# Postgres and Redis run on this kind of machine already; restart them if one has stopped.
set -euo pipefail
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "Starting PostgreSQL"
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
fi
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "Starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
fi
# With an argument: make sure that Postgres database exists (the demo's).
if [ $# -gt 0 ] && ! psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$1'" | grep -q 1; then
  echo "Creating database $1"
  createdb -h 127.0.0.1 -U postgres "$1"
fi
