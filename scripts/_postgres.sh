# Sourced by scripts/test: a throw-away PostgreSQL server from Debian's packages for the
# job and profile stores' tests, whose advisory locks run only on PostgreSQL.
#
# Installs the package when missing and we are root; starts a cluster in a temporary
# directory on a free loopback port (as the `postgres` user when root: the server
# refuses to run as root); exports BLASTRATE_TEST_DATABASE_URL; stops and removes the
# cluster when the calling script exits.  Without PostgreSQL (not root, no package) the
# store tests skip their PostgreSQL half and say why.
pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$pg_bin" ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  pg_bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [ -n "$pg_bin" ]; then
  pg_dir="$(mktemp -d -t blastrate-pg-XXXXXX)"
  if [ "$(id -u)" = "0" ]; then
    chown postgres "$pg_dir"
    pg_as=(runuser -u postgres --)
  else
    pg_as=()
  fi
  pg_port="$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  "${pg_as[@]}" "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-sync >/dev/null
  "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/log" -w -s \
    -o "-p $pg_port -k $pg_dir -c listen_addresses=127.0.0.1 -c fsync=off" start
  stop_postgres() {
    "${pg_as[@]}" "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -s stop || true
    rm -rf "$pg_dir"
  }
  trap stop_postgres EXIT
  "${pg_as[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U postgres blastrate_test
  export BLASTRATE_TEST_DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:$pg_port/blastrate_test"
else
  echo "scripts/test: no PostgreSQL (as root it is installed from Debian's packages);" \
    "the stores' PostgreSQL tests will skip" >&2
fi
