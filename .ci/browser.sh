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
# The page in Simplified Chinese needs a font with its characters (its screenshots too).
if command -v fc-list >/dev/null 2>&1 && [ -z "$(fc-list :lang=zh 2>/dev/null)" ]; then
    log "installing a Chinese font (fonts-wqy-microhei)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y fonts-wqy-microhei >&2 || { apt-get update >&2 && apt-get install -y fonts-wqy-microhei >&2; }
fi
log "$(chromium --version 2>/dev/null || echo 'chromium: version unknown')"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
LOG=$(mktemp /tmp/ba-agent-chromedriver.XXXXXX.log)
# A port free when looked at can be taken before chromedriver binds it (another driver starting
# beside this one): a driver that exits is started again on the next free port.
start_on() {
    # Only local clients; the tests start headless sessions with --no-sandbox (CI runs as root).
    chromedriver --port="$1" --allowed-ips=127.0.0.1 --log-path="$LOG" >&2 &
    PID=$!
    for _ in $(seq 1 100); do
        if ! kill -0 "$PID" 2>/dev/null; then return 1; fi
        if ! port_free "$1"; then return 0; fi
        sleep 0.1
    done
    kill "$PID" 2>/dev/null || true
    return 1
}
PORT=""
for candidate in ${BA_AGENT_WEBDRIVER_PORT:-$(seq 59515 59615)}; do
    port_free "$candidate" || continue
    if start_on "$candidate"; then PORT=$candidate; break; fi
    log "chromedriver did not start on port $candidate (log: $LOG); trying the next port"
done
if [ -z "$PORT" ]; then
    log "error: chromedriver did not start on any port (log: $LOG)"
    exit 1
fi
log "chromedriver on 127.0.0.1:$PORT (pid $PID, log $LOG)"
echo "export BA_AGENT_TEST_WEBDRIVER=http://127.0.0.1:$PORT"
echo "export BA_AGENT_TEST_CHROMEDRIVER_PID=$PID"
