"""What `GET /health` and the `vault://status` resource say: counts, models, pending work,
and the one-word state of the brain. Never the vault's path."""

from __future__ import annotations

from typing import Any

from vault_brain.records import Status


def health_body(st: Status) -> dict[str, Any]:
    return {
        "status": "degraded" if st.last_error else "ok",
        "notes": st.notes,
        "chunks": st.chunks,
        "pending_vectors": st.pending_vectors,
        "pending_summaries": st.pending_summaries,
        "embedding": st.embedding,
        "dimension": st.dimension,
        "summary_model": st.summary_model,
        "last_error": st.last_error,
        "indexer": st.indexer,
        "indexing": (
            {"done": st.indexing.done, "total": st.indexing.total} if st.indexing else None
        ),
        "strong": (
            {
                "model": st.strong_model,
                "done": st.strong_vectors,
                "total": st.strong_vectors + st.strong_pending,
            }
            if st.strong_model
            else None
        ),
    }
