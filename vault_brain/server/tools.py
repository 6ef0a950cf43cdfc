"""The six memory tools: their specs, argument checks, and how each maps onto Brain.

Specs are written by hand (not generated from signatures) so the whole tools/list reply stays
small: models pay for every token of it on every turn. There are no output schemas for the
same reason; each description names the reply fields instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp_types import Tool, ToolAnnotations

from vault_brain.budget import fit_hits
from vault_brain.config import Settings
from vault_brain.contract import (
    CURSOR_MAX,
    LIST_LIMIT_MAX,
    MODES,
    QUERY_MAX,
    REF_MAX,
    SEARCH_LIMIT_MAX,
    SNIPPET_MAX,
    SUMMARY_MAX,
    TAG_MAX,
    TAGS_MAX,
    TITLE_MAX,
    VERSION_MAX,
)
from vault_brain.errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from vault_brain.service import Brain

# Integers beyond what every JSON client holds exactly (JavaScript's safe range) are refused,
# whatever the argument: nothing downstream has to guard against 10**30.
INT_LIMIT = 2**53 - 1


@dataclass(frozen=True)
class Arg:
    """One tool argument: its JSON type, bounds, and the one line of doc a model sees."""

    kind: str  # "str" | "int" | "num" | "tags"
    doc: str = ""
    required: bool = False
    max_len: int | None = None  # None for content-like fields: the cap comes from settings
    lo: int | None = None
    hi: int | None = None
    default: int | None = None
    choices: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.kind in ("int", "num"):
            out = {"type": "integer" if self.kind == "int" else "number"}
            if self.lo is not None:
                out["minimum"] = self.lo
            if self.hi is not None:
                out["maximum"] = self.hi
            if self.default is not None:
                out["default"] = self.default
        elif self.kind == "tags":
            out = {"type": "array", "items": {"type": "string"}}
        else:
            out = {"type": "string"}
            if self.choices:
                out["enum"] = list(self.choices)
        if self.doc:
            out["description"] = self.doc
        return out


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: dict[str, Arg]
    run: Callable[[Brain, dict[str, Any]], tuple[dict[str, Any], int]]
    read_only: bool = False
    destructive: bool = False
    logged: str = ""  # the argument logged (cut to 80 chars) as the query

    def tool(self) -> Tool:
        required = [name for name, arg in self.args.items() if arg.required]
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {name: arg.schema() for name, arg in self.args.items()},
        }
        if required:
            schema["required"] = required
        return Tool(
            name=self.name,
            description=self.description,
            input_schema=schema,
            annotations=ToolAnnotations(
                # readOnlyHint defaults to false: said only when true (fewer spec tokens).
                read_only_hint=True if self.read_only else None,
                destructive_hint=None if self.read_only else self.destructive,
                open_world_hint=False,
            ),
        )


# ---- replies (compact dicts built from Brain's records) ----


def _ref(r: Any) -> dict[str, Any]:
    return {"id": r.id, "title": r.title}


def _search(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    budget = a.get("max_tokens")
    limit = a.get("limit")
    if budget is not None and limit is None:
        limit = SEARCH_LIMIT_MAX  # the budget is the bound: draw on every hit worth showing
    found = brain.search(
        a["query"],
        limit=limit,
        mode=a.get("mode"),
        tags=tuple(a.get("tags") or ()),
        folder=a.get("folder"),
        since=a.get("since"),
        until=a.get("until"),
        min_score=a.get("min_score"),
    )
    hits = found.hits
    if budget is not None:
        # The reply text as the client receives it (compact JSON, see dumps) is what counts.
        def render(kept: list[Any], omitted: int) -> str:
            return dumps(_search_reply(found, kept, omitted))

        hits, _ = fit_hits(found.hits, render, brain.count_tokens, budget)
    return _search_reply(found, hits, len(found.hits) - len(hits)), len(hits)


def _search_reply(found: Any, hits: list[Any], omitted: int) -> dict[str, Any]:
    results = [
        {
            "id": h.id,
            "title": h.title,
            "path": h.path,
            "summary": h.summary,
            "snippet": _cut(h.snippet, SNIPPET_MAX),
            "score": round(float(h.score), 4),
            "confidence": h.confidence,
            "updated": h.updated,
        }
        for h in hits
    ]
    reply: dict[str, Any] = {"results": results, "degraded": bool(found.degraded)}
    if found.nothing_relevant:
        # Say it plainly, so a model tells the user the vault lacks it instead of guessing.
        reply["nothing_relevant"] = True
    if omitted:
        reply["omitted"] = omitted  # hits left out to stay within max_tokens
    if found.indexing is not None:
        # The first pass over the vault is still running: these answers may be incomplete.
        reply["indexing"] = {"done": found.indexing.done, "total": found.indexing.total}
    return reply


def _list(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    page = brain.list(
        folder=a.get("folder"),
        tags=tuple(a.get("tags") or ()),
        since=a.get("since"),
        until=a.get("until"),
        limit=a["limit"],
        cursor=a.get("cursor"),
    )
    notes = [
        {"id": n.id, "title": n.title, "path": n.path, "summary": n.summary, "updated": n.updated}
        for n in page.notes
    ]
    reply: dict[str, Any] = {"notes": notes, "next_cursor": page.next_cursor}
    if page.indexing is not None:
        reply["indexing"] = {"done": page.indexing.done, "total": page.indexing.total}
    return reply, len(notes)


def _get(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    v = brain.get(a["id"], max_chars=a.get("max_chars"))
    out: dict[str, Any] = {
        "id": v.id,
        "title": v.title,
        "path": v.path,
        "summary": v.summary,
        "tags": list(v.tags),
        "aliases": list(v.aliases),
        "created": v.created,
        "updated": v.updated,
        "version": v.version,
        "content": v.content,
        "links_out": [_ref(r) for r in v.links_out],
        "backlinks": [_ref(r) for r in v.backlinks],
    }
    if v.truncated:
        out["truncated"] = True
    return out, 1


def _save(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    r = brain.save(
        a["title"],
        a["content"],
        summary=a.get("summary"),
        tags=tuple(a.get("tags") or ()),
        folder=a.get("folder"),
    )
    out: dict[str, Any] = {"id": r.id, "path": r.path, "version": r.version}
    if r.duplicate_of:
        out["duplicate_of"] = r.duplicate_of
    if not r.indexed:
        out["indexed"] = False  # the file is saved; search finds it once the index catches up
    return out, 1


def _update(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    if a.get("content") is not None and a.get("append") is not None:
        raise InvalidInput("give content (replace) or append, not both")
    changes = {k: a.get(k) for k in ("content", "append", "summary", "tags", "title")}
    if all(v is None for v in changes.values()):
        raise InvalidInput("nothing to update: give content, append, summary, tags or title")
    r = brain.update(a["id"], a["version"], **changes)
    out: dict[str, Any] = {"id": r.id, "version": r.version, "path": r.path}
    if not r.indexed:
        out["indexed"] = False
    return out, 1


def _delete(brain: Brain, a: dict[str, Any]) -> tuple[dict[str, Any], int]:
    done = brain.delete(a["id"], a["version"])
    return {"id": done.id, "trashed_to": done.trashed_to}, 1


# ---- the specs ----

_ID = Arg("str", "note id, path, title or alias", required=True, max_len=REF_MAX)
_VERSION = Arg("str", "version from your last memory_get", required=True, max_len=VERSION_MAX)
_TAGS = Arg("tags", "all of these tags", max_len=TAG_MAX)
_FOLDER = Arg("str", "this folder and below", max_len=REF_MAX)
_SINCE = Arg("str", "updated since: 2026-11-30, 7d, 24h", max_len=40)
_UNTIL = Arg("str", "updated until", max_len=40)

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="memory_search",
        description=(
            "Search the user's notes by meaning and words; use before answering from memory. "
            "Returns {results:[{id,title,path,summary,snippet,score,updated}],degraded}; "
            "score 0-1, comparable across searches; nothing_relevant: the vault lacks it."
        ),
        args={
            "query": Arg(
                "str", "a question or keywords, any language", required=True, max_len=QUERY_MAX
            ),
            "limit": Arg("int", "max results", lo=1, hi=SEARCH_LIMIT_MAX),
            "tags": _TAGS,
            "folder": _FOLDER,
            "since": _SINCE,
            "until": _UNTIL,
            "mode": Arg("str", "default hybrid", choices=MODES),
            "min_score": Arg("num", "default 0.15", lo=0, hi=1),
            "max_tokens": Arg("int", "reply size cap in tokens; best hits first"),
        },
        run=_search,
        read_only=True,
        logged="query",
    ),
    ToolSpec(
        name="memory_list",
        description=(
            "Browse notes, newest first. Returns {notes:[{id,title,path,summary,updated}],"
            "next_cursor}."
        ),
        args={
            "folder": _FOLDER,
            "tags": _TAGS,
            "since": _SINCE,
            "until": _UNTIL,
            "limit": Arg("int", "per page", lo=1, hi=LIST_LIMIT_MAX, default=20),
            "cursor": Arg("str", "a next_cursor", max_len=CURSOR_MAX),
        },
        run=_list,
        read_only=True,
    ),
    ToolSpec(
        name="memory_get",
        description=(
            "Read one note in full, with its version (memory_update and memory_delete need "
            "it), links_out and backlinks."
        ),
        args={"id": _ID, "max_chars": Arg("int", "cut content here", lo=1)},
        run=_get,
        read_only=True,
    ),
    ToolSpec(
        name="memory_save",
        description=(
            "Create a Markdown note (never overwrites); give a one-line summary. "
            "Returns {id,path,version}, plus duplicate_of if that content exists."
        ),
        args={
            "title": Arg("str", "becomes the file name", required=True, max_len=TITLE_MAX),
            "content": Arg("str", "Markdown body", required=True),
            "summary": Arg("str", "one line", max_len=SUMMARY_MAX),
            "tags": Arg("tags", "without #", max_len=TAG_MAX),
            "folder": Arg("str", "default: vault root", max_len=REF_MAX),
        },
        run=_save,
    ),
    ToolSpec(
        name="memory_update",
        description=(
            "Change a note's content (replace or append), summary, tags or title. "
            "If it changed since you read it: CONFLICT with current {content,version}; merge "
            "into that, never resend old text. Returns {id,version,path}."
        ),
        args={
            "id": _ID,
            "version": _VERSION,
            "content": Arg("str", "replaces the body"),
            "append": Arg("str", "added at the end"),
            "summary": Arg("str", '"" removes it', max_len=SUMMARY_MAX),
            "tags": Arg("tags", "replaces them", max_len=TAG_MAX),
            "title": Arg("str", "renames the file", max_len=TITLE_MAX),
        },
        run=_update,
    ),
    ToolSpec(
        name="memory_delete",
        description="Move a note to the vault's .trash folder. Returns {id,trashed_to}.",
        args={"id": _ID, "version": _VERSION},
        run=_delete,
        destructive=True,
    ),
)

BY_NAME: dict[str, ToolSpec] = {t.name: t for t in TOOLS}


def visible_tools(settings: Settings) -> list[ToolSpec]:
    """Read-only vaults do not list write tools: a model cannot misuse what it never sees."""
    if settings.write.read_only:
        return [t for t in TOOLS if t.read_only]
    return list(TOOLS)


def find_tool(name: str, settings: Settings) -> ToolSpec:
    spec = BY_NAME.get(name)
    if spec is None:
        raise InvalidInput(f"unknown tool {name!r}; tools: {', '.join(BY_NAME)}")
    if settings.write.read_only and not spec.read_only:
        raise Forbidden("this vault is served read-only")
    return spec


# ---- argument checks ----


def check_args(spec: ToolSpec, raw: Mapping[str, Any] | None, settings: Settings) -> dict[str, Any]:
    """Types, ranges and size caps, so Brain only ever sees sane values. Nulls mean absent."""
    raw = dict(raw or {})
    unknown = sorted(k for k in raw if k not in spec.args)
    if unknown:
        raise InvalidInput(
            f"unknown argument(s) {', '.join(unknown)}; {spec.name} takes {', '.join(spec.args)}"
        )
    out: dict[str, Any] = {}
    for name, arg in spec.args.items():
        value = raw.get(name)
        if value is None:
            if arg.required:
                raise InvalidInput(f"{name} is required")
            if arg.default is not None:
                out[name] = arg.default
            continue
        if arg.kind == "int":
            out[name] = _int(name, value, arg)
        elif arg.kind == "num":
            out[name] = _num(name, value, arg)
        elif arg.kind == "tags":
            out[name] = _tags(name, value)
        else:
            out[name] = _str(name, value, arg, settings)
    return out


def _str(name: str, value: Any, arg: Arg, settings: Settings) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    limit = arg.max_len if arg.max_len is not None else settings.write.max_content_chars
    if len(value) > limit:
        raise InvalidInput(f"{name} is too long ({len(value)} chars; max {limit})")
    if arg.choices and value not in arg.choices:
        raise InvalidInput(f"{name} must be one of {', '.join(arg.choices)}")
    if arg.required and not value.strip():
        raise InvalidInput(f"{name} must not be empty")
    return value


def _int(name: str, value: Any, arg: Arg) -> int:
    # Some clients send numbers as strings or floats ("8", 8.0); accept what is clearly integral.
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be an integer")
    lo = arg.lo if arg.lo is not None else -INT_LIMIT
    hi = arg.hi if arg.hi is not None else INT_LIMIT
    out_of_range = InvalidInput(f"{name} must be in {lo}..{hi}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        if len(value.strip()) > 20:  # int() would refuse past 4,300 digits; none is in range
            raise out_of_range
        value = int(value.strip())
    if not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer")
    if not lo <= value <= hi:
        raise out_of_range
    return value


def _num(name: str, value: Any, arg: Arg) -> float:
    """A finite number within the argument's bounds ("0.3" as text is accepted too)."""
    if isinstance(value, bool):
        raise InvalidInput(f"{name} must be a number")
    if isinstance(value, str):
        try:
            value = float(value.strip()) if len(value) <= 40 else None
        except ValueError:
            value = None
    if not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{name} must be a number")
    lo = arg.lo if arg.lo is not None else -INT_LIMIT
    hi = arg.hi if arg.hi is not None else INT_LIMIT
    if not lo <= value <= hi:
        raise InvalidInput(f"{name} must be in {lo}..{hi}")
    return float(value)


def _tags(name: str, value: Any) -> list[str]:
    # Models often send "a, b" for a list; splitting it is kinder than refusing.
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{name} must be a list of strings")
    tags = [v.strip().lstrip("#").strip() for v in value]
    tags = [t for t in tags if t]
    if len(tags) > TAGS_MAX:
        raise InvalidInput(f"{name}: at most {TAGS_MAX} tags")
    for t in tags:
        if len(t) > TAG_MAX:
            raise InvalidInput(f"{name}: a tag is at most {TAG_MAX} chars")
    return tags


# ---- replies on the wire ----


def dumps(obj: Any) -> str:
    """Compact JSON: no indentation, no spaces, real Unicode (fewer tokens for the model)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
