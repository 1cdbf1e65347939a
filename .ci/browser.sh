#!/usr/bin/env bash
# Starts chromedriver on 127.0.0.1 for the page's browser tests (crates/server/tests/browser)
# and prints, on stdout, the lines to evaluate:
#   eval "$(bash .ci/browser.sh)"
# Installs Debian's `chromium` and `chromium-driver` packages when chromedriver is missing.
# Progress goes to stderr. Stop it with: kill "$BA_AGENT_TEST_CHROMEDRIVER_PID".
set -euo pipefail

log() { echo "browser.sh: $*" >&2; }

if ! command -v chromedriver >/dev/null 2>&1 || ! command -v chromium >/dev/null 2>&1; then
    log "installing Debian's chromium and chromium-driver"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y chromium chromium-driver >&2
fi
log "$(chromium --version 2>/dev/null || echo 'chromium: version unknown')"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${BA_AGENT_WEBDRIVER_PORT:-}
if [ -z "$PORT" ]; then
    for candidate in $(seq 59515 59615); do
        if port_free "$candidate"; then PORT=$candidate; break; fi
    done
fi
if [ -z "$PORT" ]; then
    log "error: no free port between 59515 and 59615"
    exit 1
fi

LOG=$(mktemp /tmp/ba-agent-chromedriver.XXXXXX.log)
# Only local clients; the tests start headless sessions with --no-sandbox (CI runs as root).
chromedriver --port="$PORT" --allowed-ips=127.0.0.1 --log-path="$LOG" >&2 &
PID=$!
for _ in $(seq 1 100); do
    if ! port_free "$PORT"; then break; fi
    sleep 0.1
done
if port_free "$PORT"; then
    log "error: chromedriver did not start (log: $LOG)"
    exit 1
fi
log "chromedriver on 127.0.0.1:$PORT (pid $PID, log $LOG)"
echo "export BA_AGENT_TEST_WEBDRIVER=http://127.0.0.1:$PORT"
echo "export BA_AGENT_TEST_CHROMEDRIVER_PID=$PID"
