"""Embeddings: the default litellm embedder and how the one in use is chosen.

The vector indexes are created with ``EMBEDDING_DIMENSIONS``; an embedder whose vectors have
another length is refused at the first call (and ``mkg doctor`` reports indexes built for another
dimension), so the graph never holds vectors its indexes cannot search.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .contrib import Embedder
from .errors import MkgError
from .llm import PROVIDER_KEYS, credentials_for, provider_of

if TYPE_CHECKING:
    from .settings import Settings

__all__ = ["EmbeddingError", "LiteLLMEmbedder", "embed_or_none"]

log = logging.getLogger("mkg.embedding")

#: ``EMBEDDING_MODEL`` values that turn embeddings off.
DISABLED = frozenset({"none", "off", "0", "false"})
#: Texts per embedding request.
BATCH = 64


class EmbeddingError(MkgError):
    """Texts could not be embedded."""


class LiteLLMEmbedder(Embedder):
    """``EMBEDDING_MODEL`` through litellm, with the credentials of the settings."""

    name = "litellm"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.model = settings.embedding_model
        self.dimensions = settings.embedding_dimensions

    def is_available(self) -> bool:
        from .local_embedder import LOCAL_MODEL

        if self.model.strip().lower() in DISABLED or self.model.strip().lower() == LOCAL_MODEL:
            return False
        creds = credentials_for(self.model, self.settings)
        # A provider MKG has no key setting for is left to litellm's own environment handling.
        return bool(creds.api_key) or provider_of(self.model) not in PROVIDER_KEYS

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        from .llm import _litellm

        if not texts:
            return []
        litellm = _litellm()
        creds = credentials_for(self.model, self.settings)
        extra = {"dimensions": self.dimensions} if "text-embedding-3" in self.model else {}
        vectors: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            chunk = [text or " " for text in texts[start : start + BATCH]]
            try:
                response = litellm.embedding(
                    model=self.model,
                    input=chunk,
                    timeout=self.settings.llm_timeout,
                    **creds.kwargs(),
                    **extra,
                )
            except Exception as exc:
                raise EmbeddingError(f"{self.model}: {type(exc).__name__}: {exc}") from exc
            items = sorted(response.data, key=lambda item: _field(item, "index"))
            vectors += [[float(x) for x in _field(item, "embedding")] for item in items]
        check_dimensions(vectors, self.dimensions, self.model)
        return vectors


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def check_dimensions(vectors: Iterable[list[float]], expected: int, model: str) -> None:
    for vector in vectors:
        if len(vector) != expected:
            raise EmbeddingError(
                f"{model} returned {len(vector)}-dimensional vectors but EMBEDDING_DIMENSIONS is "
                f"{expected}: choose a matching model, or set EMBEDDING_DIMENSIONS to {len(vector)} and "
                "rebuild the vector indexes (`mkg doctor` says how)"
            )


def choose_embedder(embedders: Iterable[Embedder]) -> Embedder | None:
    """The first available embedder (plugins come before the built-in litellm one)."""
    for embedder in embedders:
        try:
            if embedder.is_available():
                return embedder
        except Exception as exc:
            log.warning("embedder %r cannot tell whether it is available: %s", embedder.name, exc)
    return None


def embed_or_none(embedder: Embedder | None, texts: Sequence[str]) -> list[list[float] | None]:
    """Best effort: vectors for ``texts``, or None for each when there is no embedder or it fails."""
    if embedder is None or not texts:
        return [None] * len(texts)
    try:
        vectors = embedder.embed(texts)
    except Exception as exc:
        log.warning("embedding %d texts with %r failed: %s", len(texts), embedder.name, exc)
        return [None] * len(texts)
    if len(vectors) != len(texts):
        log.warning("embedder %r returned %d vectors for %d texts", embedder.name, len(vectors), len(texts))
        return [None] * len(texts)
    return list(vectors)
