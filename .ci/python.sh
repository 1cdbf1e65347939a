#!/usr/bin/env bash
# The Python package (crates/python): builds its wheel with maturin (the dev profile, in the
# workspace's target/, so what the tests built is reused), installs the wheel into a fresh
# virtual environment with pytest and the notebook's tools, runs the pytest suite against the
# scripted model and executes examples/analyst.ipynb, checking its outputs.
#
# Under CI=true every failure fails the script; elsewhere a missing Python tool is named and the
# step is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "python.sh: $*" >&2; }
in_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }

echo "== python package (wheel, pytest, notebook)"
started=$SECONDS
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
    if in_ci; then
        log "python3 with venv and ensurepip is required (Debian: python3-venv)"
        exit 1
    fi
    log "skipped: python3 with venv and ensurepip is missing (Debian: python3-venv)"
    exit 0
fi

work=target/python
rm -rf "$work/build-venv" "$work/test-venv" "$work/wheels"
mkdir -p "$work"

# The programs the suite drives: the command line (token counts compared with it) and the
# scripted model (the agent's provider in the tests and the notebook). The workspace's tests
# build both (each package's integration tests run its programs); built here only when
# missing, since a build of one package alone unifies other features and recompiles much.
[ -x target/debug/ba-scripted-model ] || cargo build --locked -p ba-testkit --bin ba-scripted-model
[ -x target/debug/ba-agent ] || cargo build --locked -p ba-cli --bin ba-agent

python3 -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install --quiet --disable-pip-version-check "maturin>=1.9,<2"
built=$SECONDS
"$work/build-venv/bin/maturin" build --locked --manifest-path crates/python/Cargo.toml \
    --interpreter python3 --compatibility linux --out "$work/wheels"
wheel=$(ls "$work"/wheels/ba_agent-*.whl)
log "wheel $(basename "$wheel"): $(du -h "$wheel" | cut -f1), built in $((SECONDS - built)) s"

# A second, fresh environment: the wheel must install and work on its own.
python3 -m venv "$work/test-venv"
py="$work/test-venv/bin/python"
"$py" -m pip install --quiet --disable-pip-version-check "$wheel" pytest nbclient nbformat \
    ipykernel matplotlib
"$py" -c "import ba_agent; print('ba_agent imports from', ba_agent.__file__)"

export BA_AGENT_BIN="$PWD/target/debug/ba-agent"
export BA_SCRIPTED_MODEL="$PWD/target/debug/ba-scripted-model"
# The suite runs from elsewhere than the sources, so the installed wheel is what it imports.
root=$PWD
(cd "$work" && "$root/$py" -m pytest -q -p no:cacheprovider "$root/crates/python/tests")

PATH="$PWD/$work/test-venv/bin:$PATH" "$py" examples/check_notebook.py
log "done in $((SECONDS - started)) s"
