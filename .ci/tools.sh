#!/usr/bin/env bash
# Installs the real programs the built-in tools are tested against (crates/builtins/tests/it):
# LibreOffice Calc (headless conversions to .xlsx, .ods, .xls), Python's openpyxl (workbooks
# with dates, formulas and merged cells) and msoffcrypto-tool (a password-protected workbook),
# and pandas with matplotlib for the journeys whose run_python code reads an upload and draws a chart,
# and the Python mcp package (a client of `ba-agent mcp serve`).
# iconv comes with libc-bin. Under CI=true the tests fail when one of them is missing.
set -euo pipefail

log() { echo "tools.sh: $*" >&2; }

if ! command -v soffice >/dev/null 2>&1; then
    log "installing Debian's libreoffice-calc-nogui"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends libreoffice-calc-nogui >&2
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import openpyxl, msoffcrypto, pandas, matplotlib" >/dev/null 2>&1; then
    # A bare Debian python3 has no pip and refuses pip installs (PEP 668): Debian's openpyxl and
    # pip first; msoffcrypto-tool is not packaged by Debian, so it comes from PyPI.
    if { ! command -v python3 >/dev/null 2>&1 || [ "$(command -v python3)" = /usr/bin/python3 ]; } \
        && command -v apt-get >/dev/null 2>&1; then
        log "installing Debian's python3, python3-openpyxl, python3-pandas, python3-matplotlib and python3-pip"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update >&2
        apt-get install -y --no-install-recommends python3 python3-openpyxl python3-pandas \
            python3-matplotlib python3-pip >&2
    fi
    if ! python3 -c "import openpyxl, msoffcrypto, pandas, matplotlib" >/dev/null 2>&1; then
        log "installing openpyxl, msoffcrypto-tool, pandas and matplotlib from PyPI"
        python3 -m pip install --quiet --disable-pip-version-check openpyxl msoffcrypto-tool \
            pandas matplotlib >&2 \
            || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
                openpyxl msoffcrypto-tool pandas matplotlib >&2
    fi
fi
# The Python `mcp` package (PyPI), a third-party MCP client that drives `ba-agent mcp serve` in
# the CLI's tests, in its own virtual environment under target/ (kept between runs).
if ! target/mcp-python/bin/python -c "import mcp" >/dev/null 2>&1; then
    log "installing the Python mcp package in target/mcp-python"
    if ! python3 -m venv target/mcp-python >&2; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update >&2
        apt-get install -y --no-install-recommends python3-venv >&2
        python3 -m venv target/mcp-python >&2
    fi
    target/mcp-python/bin/pip install --quiet --disable-pip-version-check 'mcp>=1.20,<2' >&2
fi
# pip may put the msoffcrypto-tool script outside PATH (e.g. ~/.local/bin).
if ! command -v msoffcrypto-tool >/dev/null 2>&1; then
    bindir=$(python3 -c "import sysconfig; print(sysconfig.get_path('scripts'))")
    log "msoffcrypto-tool is in $bindir; add it to PATH"
    echo "export PATH=\"$bindir:\$PATH\""
fi
soffice --version >&2
iconv --version | head -n 1 >&2
