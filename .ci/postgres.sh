#!/usr/bin/env bash
# Starts a throwaway PostgreSQL server on 127.0.0.1 for the storage tests and prints, on
# stdout, the lines to evaluate:
#   eval "$(bash .ci/postgres.sh)"
# Installs Debian's `postgresql` package when no server binaries are found. Progress goes
# to stderr. Stop the server with: pg_ctl -D "$BA_AGENT_TEST_PGDATA" stop (as the same user).
set -euo pipefail

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then
        echo "$dir"
    fi
}

BIN=$(find_bin)
if [ -z "$BIN" ]; then
    log "no PostgreSQL server found; installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y postgresql >&2
    BIN=$(find_bin)
    if [ -z "$BIN" ]; then
        log "error: postgresql installed but no initdb under /usr/lib/postgresql/*/bin"
        exit 1
    fi
fi

# The server refuses to run as root: run it as the `postgres` user the package creates.
if [ "$(id -u)" = 0 ]; then
    AS=(runuser -u postgres --)
else
    AS=()
fi

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${BA_AGENT_PG_PORT:-}
if [ -z "$PORT" ]; then
    for candidate in $(seq 55432 55532); do
        if port_free "$candidate"; then PORT=$candidate; break; fi
    done
fi
if [ -z "$PORT" ]; then
    log "error: no free port between 55432 and 55532"
    exit 1
fi

DATA=$(mktemp -d /tmp/ba-agent-pg.XXXXXX)
if [ "$(id -u)" = 0 ]; then
    chown postgres: "$DATA"
fi
log "initialising $DATA with $BIN"
"${AS[@]}" "$BIN/initdb" -D "$DATA" -U postgres -A trust --no-sync >&2
# A throwaway server for tests: durability of the server itself is not under test, so skip
# its fsyncs to keep the suite quick on small machines.
"${AS[@]}" "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >&2
"${AS[@]}" "$BIN/createdb" -h 127.0.0.1 -p "$PORT" -U postgres ba_agent_test >&2
log "server on 127.0.0.1:$PORT, database ba_agent_test"
echo "export BA_AGENT_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$PORT/ba_agent_test"
echo "export BA_AGENT_TEST_PGDATA=$DATA"
