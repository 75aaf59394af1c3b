"""The tools' embeddings: MemPalace's configured embedder, its failures told as what to fix.

An embedder that cannot be reached (an ``openai-compat`` URL that is down, a model that is not
installed) would otherwise surface as the SDK's bare "Error executing tool"; MemPalace's own tools
say which embedder failed, and so do these.
"""

from __future__ import annotations

from typing import Optional, Sequence

from mempalace_pg.mcp_tools.arguments import ToolInputError


def _failure(what: str, exc: Exception) -> ToolInputError:
    detail = (str(exc).strip().splitlines() or [""])[0][:300]
    return ToolInputError(
        f"could not embed {what} with MemPalace's configured embedder ({type(exc).__name__}: {detail}); "
        "check MemPalace's embedding settings (`mempalace status`); nothing was written"
    )


def query_vector(text: str) -> list[float]:
    from mempalace_pg.retrieval import embed_query

    try:
        return embed_query(text)
    except Exception as exc:  # whatever the embedder raises, say what to fix
        raise _failure("the query", exc) from None


def document_vectors(texts: Sequence[str], metadatas: Optional[Sequence[dict]] = None) -> list[list[float]]:
    from mempalace_pg.retrieval import embed_documents

    try:
        return embed_documents(texts, metadatas)
    except Exception as exc:  # whatever the embedder raises, say what to fix
        raise _failure("the memory", exc) from None


__all__ = ["query_vector", "document_vectors"]
