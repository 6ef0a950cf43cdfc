"""Notes as MCP resources, for clients that let a person attach context by hand (a `@`
mention, an attach menu) without the model making a tool call.

- `note://{id}`: one note's Markdown body, as memory_get gives it (an id, a path, a title or
  an alias, percent-encoded); its id, title, path and version ride in `_meta`.
- `vault://recent`: the newest notes, as memory_list lists them (JSON).
- `vault://status`: what the index holds and whether it is well (JSON, as /health).

resources/list offers the two fixed ones, then every note newest first, a page at a time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from mcp_types import (
    ListResourcesResult,
    ListResourceTemplatesResult,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from vault_brain.errors import InvalidInput
from vault_brain.server.health import health_body
from vault_brain.server.tools import dumps

if TYPE_CHECKING:
    from vault_brain.service import Brain

NOTE_SCHEME = "note://"
RECENT_URI = "vault://recent"
STATUS_URI = "vault://status"
PAGE = 100  # notes per resources/list page
RECENT = 20  # notes in vault://recent
MARKDOWN = "text/markdown"
JSON = "application/json"

FIXED = [
    Resource(
        uri=RECENT_URI,
        name="recent",
        title="Recently updated notes",
        description=f"The {RECENT} newest notes: id, title, path, summary, updated.",
        mime_type=JSON,
    ),
    Resource(
        uri=STATUS_URI,
        name="status",
        title="Index status",
        description="Notes, chunks, pending vectors and summaries, models, errors.",
        mime_type=JSON,
    ),
]

TEMPLATES = ListResourceTemplatesResult(
    resource_templates=[
        ResourceTemplate(
            uri_template=NOTE_SCHEME + "{id}",
            name="note",
            title="A note",
            description="One note's Markdown by id (or path, title, alias).",
            mime_type=MARKDOWN,
        )
    ]
)


def note_uri(ref: str) -> str:
    return NOTE_SCHEME + quote(ref, safe="")


def list_resources(brain: Brain, cursor: str | None) -> ListResourcesResult:
    """The fixed resources, then the notes newest first; the cursor is memory_list's."""
    page = brain.list(limit=PAGE, cursor=cursor)
    notes = [
        Resource(
            uri=note_uri(n.id),
            name=n.path,
            title=n.title,
            description=n.summary or None,
            mime_type=MARKDOWN,
        )
        for n in page.notes
    ]
    fixed = FIXED if cursor is None else []
    return ListResourcesResult(resources=[*fixed, *notes], next_cursor=page.next_cursor)


def read_resource(brain: Brain, uri: str) -> ReadResourceResult:
    if uri == RECENT_URI:
        page = brain.list(limit=RECENT)
        fields = ("id", "title", "path", "summary", "updated")
        notes = [{f: getattr(n, f) for f in fields} for n in page.notes]
        return _text(uri, dumps({"notes": notes}), JSON)
    if uri == STATUS_URI:
        return _text(uri, json.dumps(health_body(brain.status()), ensure_ascii=False), JSON)
    if uri.startswith(NOTE_SCHEME) and len(uri) > len(NOTE_SCHEME):
        view = brain.get(unquote(uri[len(NOTE_SCHEME) :]))
        meta = {"id": view.id, "title": view.title, "path": view.path, "version": view.version}
        return _text(uri, view.content, MARKDOWN, meta)
    raise InvalidInput(
        f"no resource {uri[:200]!r}; there are {RECENT_URI}, {STATUS_URI} and "
        f"{NOTE_SCHEME}{{id}} (an id, path, title or alias, percent-encoded)"
    )


def _text(uri: str, text: str, mime: str, meta: dict | None = None) -> ReadResourceResult:
    return ReadResourceResult(
        contents=[TextResourceContents(uri=uri, mime_type=mime, text=text, meta=meta)]
    )
