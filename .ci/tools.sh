#!/usr/bin/env bash
# Installs the real programs the built-in tools are tested against (crates/builtins/tests/it):
# LibreOffice Calc (headless conversions to .xlsx, .ods, .xls), Python's openpyxl (workbooks
# with dates, formulas and merged cells) and msoffcrypto-tool (a password-protected workbook),
# and pandas with matplotlib for the journeys whose run_python code reads an upload and draws a chart.
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
# pip may put the msoffcrypto-tool script outside PATH (e.g. ~/.local/bin).
if ! command -v msoffcrypto-tool >/dev/null 2>&1; then
    bindir=$(python3 -c "import sysconfig; print(sysconfig.get_path('scripts'))")
    log "msoffcrypto-tool is in $bindir; add it to PATH"
    echo "export PATH=\"$bindir:\$PATH\""
fi
soffice --version >&2
iconv --version | head -n 1 >&2
