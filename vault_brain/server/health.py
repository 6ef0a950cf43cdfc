"""What `GET /health` and the `vault://status` resource say: counts, models, pending work,
and the one-word state of the brain. Never the vault's path."""

from __future__ import annotations

from typing import Any

from vault_brain.records import Status


def health_body(st: Status) -> dict[str, Any]:
    """`status` is "degraded" while an endpoint or the strong tier fails (and `reason` says
    which and why), else "indexing" while a first pass over the vault runs (`indexing` has
    the counts), else "ok"."""
    reason = failing(st)
    if reason:
        state = "degraded"
    elif st.indexing is not None:
        state = "indexing"
    else:
        state = "ok"
    return {
        "status": state,
        "reason": reason,
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
                "kernel": st.strong_kernel,
            }
            if st.strong_model
            else None
        ),
    }


def failing(st: Status) -> str | None:
    """What is failing, from the errors the indexer recorded (cleared by the next success)."""
    problems = [
        f"{what} failing: {error}"
        for what, error in (
            ("embedding endpoint", st.embed_error),
            ("summary endpoint", st.summary_error),
            ("multilingual (strong) tier", st.strong_error),
        )
        if error
    ]
    return "; ".join(problems) or None
