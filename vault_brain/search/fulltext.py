"""The full-text arm: the query analysed like the notes were, bm25 over chunks (FTS5)."""

from __future__ import annotations

from vault_brain.index.records import TextQuery
from vault_brain.index.store import Reads
from vault_brain.index.text import query_terms
from vault_brain.search.base import ArmResult, Request, collapse


def text_query(query: str) -> TextQuery:
    """The query's words in their indexed forms, one group per word."""
    return TextQuery(tuple((term,) for term in query_terms(query)))


class FullTextArm:
    name = "fts"

    def retrieve(self, reads: Reads, request: Request) -> ArmResult:
        query = text_query(request.query)
        if not query:
            return ArmResult(self.name, [])
        hits = reads.search_text(query, request.filters, request.depth)
        return ArmResult(self.name, collapse(hits))
