"""MemPalace's configured embedder, called as MemPalace calls it: one query, or a batch of drawers.

:func:`query_vector` and :func:`document_vectors` are the same calls with a failure told as what to fix
(an ``openai-compat`` URL that is down, a model that is not installed): the CLI prints it, the MCP tools
answer it, instead of a bare traceback or the SDK's "Error executing tool".
"""

from __future__ import annotations

from typing import Optional, Sequence

from mempalace_pg.config import ConfigError


def embed_query(text: str) -> list[float]:
    """Embed a query with MemPalace's configured embedder (as ``mempalace search`` does)."""
    from mempalace.embedding import configured_embedding_function

    ef = configured_embedding_function()
    embed = getattr(ef, "embed_query", None)
    vectors = embed(input=[text]) if callable(embed) else ef(input=[text])
    vector = vectors[0]
    return vector.tolist() if hasattr(vector, "tolist") else [float(x) for x in vector]


def embed_documents(texts: Sequence[str], metadatas: Optional[Sequence[dict]] = None) -> list[list[float]]:
    """Embed drawer documents with MemPalace's configured embedder, as MemPalace's own writes do: its
    ``embed_documents`` (given the metadatas when it takes them: some embedders use a drawer's title),
    else the embedder itself."""
    import inspect

    from mempalace.embedding import configured_embedding_function

    ef = configured_embedding_function()
    method = getattr(ef, "embed_documents", None)
    if callable(method):
        takes_metadatas = "metadatas" in inspect.signature(method).parameters
        vectors = (
            method(input=list(texts), metadatas=metadatas) if takes_metadatas else method(input=list(texts))
        )
    else:
        vectors = ef(input=list(texts))
    return [v.tolist() if hasattr(v, "tolist") else [float(x) for x in v] for v in vectors]


class EmbedderError(ConfigError):
    """MemPalace's configured embedder failed; the message says which call and what to check."""


def embedder_failure(what: str, exc: Exception) -> EmbedderError:
    detail = (str(exc).strip().splitlines() or [""])[0][:300]
    return EmbedderError(
        f"could not embed {what} with MemPalace's configured embedder ({type(exc).__name__}: {detail}); "
        "check MemPalace's embedding settings (`mempalace status`); nothing was written"
    )


def query_vector(text: str) -> list[float]:
    """:func:`embed_query`, its failure an :class:`EmbedderError`."""
    try:
        return embed_query(text)
    except Exception as exc:  # whatever the embedder raises, say what to fix
        raise embedder_failure("the query", exc) from None


def document_vectors(texts: Sequence[str], metadatas: Optional[Sequence[dict]] = None) -> list[list[float]]:
    """:func:`embed_documents`, its failure an :class:`EmbedderError`."""
    try:
        return embed_documents(texts, metadatas)
    except Exception as exc:  # whatever the embedder raises, say what to fix
        raise embedder_failure("the memory", exc) from None


__all__ = ["embed_query", "embed_documents", "query_vector", "document_vectors", "EmbedderError"]
