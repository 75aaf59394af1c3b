"""The tools' embeddings: MemPalace's configured embedder (:mod:`mempalace_pg.retrieval.embedding`), its
failures answered as a tool's input error, which the server sends back as what to fix."""

from __future__ import annotations

from typing import Optional, Sequence

from mempalace_pg.mcp_tools.arguments import ToolInputError


def query_vector(text: str) -> list[float]:
    from mempalace_pg.retrieval.embedding import EmbedderError
    from mempalace_pg.retrieval.embedding import query_vector as embedded

    try:
        return embedded(text)
    except EmbedderError as exc:
        raise ToolInputError(str(exc)) from None


def document_vectors(texts: Sequence[str], metadatas: Optional[Sequence[dict]] = None) -> list[list[float]]:
    from mempalace_pg.retrieval.embedding import EmbedderError
    from mempalace_pg.retrieval.embedding import document_vectors as embedded

    try:
        return embedded(texts, metadatas)
    except EmbedderError as exc:
        raise ToolInputError(str(exc)) from None


__all__ = ["query_vector", "document_vectors"]
