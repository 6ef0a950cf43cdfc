"""`vault-brain search`, the command a user times. The typer command in cli.py declares it
(its help and usage errors) and calls run(); entry.py calls run() straight from parse()
when the arguments are plain, so a one-shot search does not import typer or build its
command (~40 of its CPU-ms). tests/test_cli_search.py holds parse() to typer's parser."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from vault_brain import log
from vault_brain.cli_base import fail, open_brain, settings_for, typed_values
from vault_brain.config import Settings
from vault_brain.contract import MODES, SEARCH_LIMIT_MAX
from vault_brain.errors import InvalidInput, VaultBrainError
from vault_brain.records import plain

LIMIT_RANGE = (1, 100)  # --limit
MIN_SCORE_RANGE = (0.0, 1.0)  # --min-score
MAX_TOKENS_MIN = 1  # --max-tokens

# Every option of the search command, as cli.py declares it to typer: name -> (parameter,
# kind). A kind is a flag (bool), one value (str, int, float) or a repeatable value (list).
OPTIONS: dict[str, tuple[str, type]] = {
    "--vault": ("vault", str),
    "-v": ("vault", str),
    "--config": ("config", str),
    "-c": ("config", str),
    "--limit": ("limit", int),
    "-n": ("limit", int),
    "--mode": ("mode", str),
    "--tag": ("tag", list),
    "--folder": ("folder", str),
    "--since": ("since", str),
    "--until": ("until", str),
    "--explain": ("explain", bool),
    "--min-score": ("min_score", float),
    "--max-tokens": ("max_tokens", int),
    "--json": ("json_out", bool),
}
DEFAULTS: dict[str, Any] = {
    "vault": None,
    "config": None,
    "limit": None,
    "mode": None,
    "tag": None,
    "folder": None,
    "since": None,
    "until": None,
    "explain": False,
    "min_score": None,
    "max_tokens": None,
    "json_out": False,
}


def parse(args: list[str]) -> dict[str, Any] | None:
    """run()'s arguments from the words after `search`, or None when they are not plain:
    help, an option unknown or given twice, a value missing, out of range or of the wrong
    type, no query or two, `--`, a word that starts with '-' where a value or the query
    goes. Typer then parses them and answers with its own help and messages."""
    params: dict[str, Any] = {"query": None, **DEFAULTS}
    seen: set[str] = set()
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if not word.startswith("-") or word == "-":
            if params["query"] is not None:
                return None
            params["query"] = word
            continue
        name, eq, value = word.partition("=")
        if name not in OPTIONS or (eq and not name.startswith("--")):
            return None
        dest, kind = OPTIONS[name]
        if kind is bool:
            if eq:
                return None
            params[dest] = True
            continue
        if not eq:
            if i == len(args) or args[i].startswith("-"):
                return None
            value = args[i]
            i += 1
        if kind is list:
            params[dest] = [*(params[dest] or []), value]
            continue
        if dest in seen:
            return None
        seen.add(dest)
        typed = _typed(dest, kind, value)
        if typed is None:
            return None
        params[dest] = typed
    return params if params["query"] is not None else None


def _typed(dest: str, kind: type, value: str) -> Any:
    if kind is str:
        return value
    try:
        number = kind(value)
    except ValueError:
        return None
    if kind is float and not math.isfinite(number):
        return None
    low, high = {
        "limit": LIMIT_RANGE,
        "min_score": MIN_SCORE_RANGE,
        "max_tokens": (MAX_TOKENS_MIN, None),
    }[dest]
    if number < low or (high is not None and number > high):
        return None
    return number


def run(
    query: str,
    vault: str | None = None,
    config: str | None = None,
    limit: int | None = None,
    mode: str | None = None,
    tag: list[str] | None = None,
    folder: str | None = None,
    since: str | None = None,
    until: str | None = None,
    explain: bool = False,
    min_score: float | None = None,
    max_tokens: int | None = None,
    json_out: bool = False,
) -> None:
    """The search: a running watch or serve answers it (its models are loaded), else this
    process does, syncing first when no watcher keeps the index fresh, and then leaves a
    warm resident (vault_brain/resident.py) for the next searches."""
    if mode is not None and mode not in MODES:
        raise fail(f"--mode must be one of {', '.join(MODES)}, not {mode!r}", 2)
    settings = settings_for(vault, config)
    log.use_human_output()
    if max_tokens is not None and limit is None:
        limit = SEARCH_LIMIT_MAX  # the budget is the bound: draw on every hit worth showing
    cut = settings.search.min_score if min_score is None else min_score
    asked = dict(limit=limit, mode=mode, tags=tag or (), folder=folder, since=since)
    asked.update(until=until, explain=explain, min_score=min_score)
    warm = _warm_search(settings, query, asked) if max_tokens is None else None
    if warm is not None:  # a watcher or server answered: no index or model loaded here
        _print_search(warm, warm.hits, 0, cut, None, json_out, explain)
        return
    from vault_brain import oneshot

    early = oneshot.begin(settings, mode)  # the vector arm's child, forked before the Brain
    try:
        text, result = _search_here(settings, query, asked, early, cut, max_tokens, json_out)
    finally:
        if early is not None:
            early.discard()  # unless the Brain took it (then it is ended already)
    _print_search(result, None, 0, cut, max_tokens, json_out, explain, text=text)
    _leave_warm(settings, config)


def _search_here(
    settings: Settings,
    query: str,
    asked: dict[str, Any],
    early: Any,
    cut: float,
    max_tokens: int | None,
    json_out: bool,
) -> tuple[str, Any]:
    """The search in this process: (its text, its result)."""
    explain = asked["explain"]
    with open_brain(settings) as brain, typed_values():
        picked = ("mode", "limit", "tags", "folder", "since", "until")
        brain.begin_query(query, early=early, **{k: asked[k] for k in picked})
        mode = asked["mode"]
        brain.refresh_if_unwatched(vectors=(mode or settings.search.mode) != "fts")
        result = brain.search(query, light_query=True, **asked)

        def render(hits: list[Any], omitted: int) -> str:
            if json_out:
                return _search_json(result, hits, omitted, explain)
            return _search_lines(result, hits, omitted, cut, max_tokens)

        if max_tokens is None:
            text = render(result.hits, 0)
        else:
            from vault_brain.budget import fit_hits

            try:
                _, text = fit_hits(result.hits, render, brain.count_tokens, max_tokens)
            except InvalidInput as exc:
                raise fail(f"--max-tokens: {exc.message}", 2) from None
    return text, result


def _leave_warm(settings: Settings, config: str | None) -> None:
    """After an in-process search, a warm resident for the next ones (search.keep_warm
    seconds idle, vault_brain/resident.py); the output is printed already."""
    sys.stdout.flush()
    from vault_brain import resident

    resident.spawn(settings, config)


def _warm_search(settings: Settings, query: str, asked: dict[str, Any]) -> Any:
    """The answer of the watcher or server running for this vault (vault_brain/warm.py), or
    None to search in-process."""
    from vault_brain import warm
    from vault_brain.records import Hit, Indexing, SearchResult

    try:
        with typed_values():
            fields = warm.ask_search(settings, query, **asked)
    except VaultBrainError as exc:
        raise fail(f"{exc.code}: {exc.message}", 1) from None
    if fields is None:
        return None
    for key in ("indexing", "strong"):
        if fields.get(key) is not None:
            fields[key] = Indexing(**fields[key])
    fields["hits"] = [Hit(**h) for h in fields["hits"]]
    return SearchResult(**fields)


def _print_search(
    result: Any,
    hits: list[Any] | None,
    omitted: int,
    cut: float,
    max_tokens: int | None,
    json_out: bool,
    explain: bool,
    *,
    text: str | None = None,
) -> None:
    if text is None:
        if json_out:
            text = _search_json(result, hits or [], omitted, explain)
        else:
            text = _search_lines(result, hits or [], omitted, cut, max_tokens)
    if result.degraded and not json_out:
        print(f"(full text only: {result.reason})", file=sys.stderr, flush=True)
    sys.stdout.write(text)
    sys.stdout.flush()


def _search_json(result: Any, hits: list[Any], omitted: int, explain: bool) -> str:
    """`search --json`, as README documents it: `indexing` is always there (null when no
    first pass runs), `omitted` only when --max-tokens left hits out."""
    rows = [plain(h) for h in hits]
    if not explain:
        for row in rows:
            row.pop("explain", None)
    out: dict[str, Any] = {"results": rows, "mode": result.mode, "degraded": result.degraded}
    if explain:
        out["vector_tier"] = result.vector_tier
    if result.nothing_relevant:
        out["nothing_relevant"] = True
    if omitted:
        out["omitted"] = omitted
    out["indexing"] = (
        {"done": result.indexing.done, "total": result.indexing.total} if result.indexing else None
    )
    return json.dumps(out, ensure_ascii=False, indent=2, default=str) + "\n"


def _tier_words(result: Any) -> str:
    """Which vectors answered, for --explain."""
    share = ""
    if result.strong is not None and result.strong.total:
        share = f"; multilingual {result.strong.done:,} of {result.strong.total:,} chunks"
    words = {
        "instant": "the instant tier",
        "strong": "the multilingual tier",
        "instant+strong": "the instant and the multilingual tiers",
    }
    return words.get(result.vector_tier, result.vector_tier) + share


def _search_lines(
    result: Any, hits: list[Any], omitted: int, cut: float, max_tokens: int | None
) -> str:
    """`search` for a person: one line per hit and its snippet."""
    lines: list[str] = []
    if not result.hits:
        if result.below_cutoff and result.nothing_relevant:
            n = result.below_cutoff
            lines.append(
                f"nothing relevant ({n} weak match{'' if n == 1 else 'es'} under the "
                f"min_score of {cut})"
            )
        else:
            lines.append("no matches")
    for i, hit in enumerate(hits, 1):
        lines.append(
            f"{i}. {hit.title}  [{hit.path}]  id={hit.id}  score={hit.score:.3f} ({hit.confidence})"
        )
        if hit.snippet:
            lines.append(f"   {hit.snippet}")
        if hit.explain:
            lines.append(f"   explain: {json.dumps(hit.explain)}")
    if hits and hits[0].explain and result.vector_tier:
        lines.append(f"(vectors: {_tier_words(result)})")
    if omitted:
        lines.append(f"({omitted} more left out to fit --max-tokens {max_tokens})")
    if result.indexing:
        lines.append(
            f"(the first pass over the vault is still running: {result.indexing.done:,} of "
            f"{result.indexing.total:,} files indexed, so there may be more)"
        )
    return "\n".join(lines) + "\n"
