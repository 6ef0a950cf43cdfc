"""The `vault-brain` command line. It calls service.Brain only (and the server/watcher
entry points that wrap a Brain). Exit codes: 0 ok, 1 runtime error, 2 usage or config."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import sys
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from vault_brain import __version__, cli_search, log
from vault_brain.cli_base import fail, open_brain, settings_for, typed_values
from vault_brain.cli_search import LIMIT_RANGE, MAX_TOKENS_MIN, MIN_SCORE_RANGE
from vault_brain.config import CONFIG_NAME, INDEX_DIR
from vault_brain.errors import ConfigError, InvalidExport, NotFound, VaultBrainError
from vault_brain.records import plain

app = typer.Typer(
    name="vault-brain",
    help="A second brain for LLMs in a folder of Markdown notes: index, search, watch, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

VaultOpt = Annotated[
    str | None,
    typer.Option(
        "--vault", "-v", help="The vault folder (env: VAULT_BRAIN_VAULT).", show_default=False
    ),
]
ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        "-c",
        help=(
            "A config.toml, used in place of <vault>/.vault-brain/config.toml and over "
            "~/.config/vault-brain/config.toml (env: VAULT_BRAIN_CONFIG)."
        ),
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]


def _dump(obj: Any) -> None:
    typer.echo(json.dumps(obj, ensure_ascii=False, indent=2, default=str))


@app.command()
def init(vault: VaultOpt = None, config: ConfigOpt = None) -> None:
    """Create the index folder and a config.toml in the vault, then build the index."""
    settings = settings_for(vault, config)
    folder = settings.vault_path / INDEX_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / CONFIG_NAME
    if not target.exists():
        target.write_text(
            "# vault-brain settings for this vault. Every key, with its default and meaning,\n"
            "# is documented in config.toml at the root of the vault-brain repository.\n"
            "# Environment variables VAULT_BRAIN_<SECTION>_<KEY> override these.\n\n"
            '[embed]\nprovider = "local"   # local | ollama | openai | none\n\n'
            '[search]\nmode = "hybrid"       # hybrid | fts | vector\n',
            encoding="utf-8",
        )
        typer.echo(f"wrote {target}")
    index(vault=str(settings.vault_path), config=config, full=False, json_out=False)


@app.command()
def index(
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    full: Annotated[
        bool, typer.Option("--full", help="Re-parse every note, changed or not.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Bring the index in step with the vault (incremental; --full rebuilds every note),
    in phases: scan, parse (files), vectors and e5 vectors (chunks), each with its rate and
    the time left, and a summary line when it ends. Ctrl-C stops after the current batch,
    keeps what is done and exits 130: run `index` again to continue where it stopped."""
    settings = settings_for(vault, config)
    log.use_human_output()
    from vault_brain.progress import Phases

    # Not one-shot: the calibration at the end asks hundreds of questions, which the
    # in-memory copy of the vectors answers ~20x faster than sqlite-vec's scan (one load).
    with _ctrl_c_stops() as stop, open_brain(settings, one_shot=False) as brain:
        if brain.watched() and not full:
            # A watcher or server holds the indexer lock and keeps the index in step.
            st = brain.status()
            if json_out:
                _dump({"watched": True, "notes": st.notes, "pending_vectors": st.pending_vectors})
            else:
                typer.echo(
                    f"a running vault-brain watch/serve keeps this index in step "
                    f"({st.notes} notes, {st.pending_vectors} vectors pending)"
                )
            return
        # The role is held for every phase, so `status` meanwhile says an index run is in
        # progress and a watcher started meanwhile waits for the run to end.
        with brain.index_run(), Phases(stopping=stop) as phases:
            report = _sync_phases(brain, phases, full, stop)
            # A big pass stores the instant vectors with the notes (report.vectors).
            vectors = report.vectors + _vector_phase(brain, phases, stop, strong=False)
            strong = _vector_phase(brain, phases, stop, strong=True)
            # What "no relation" scores in this vault, once its vectors are in (seconds).
            calibrated = [] if stop.is_set() else _calibrate_phase(brain, phases)
            if not stop.is_set():
                brain.keep_query_models()  # the next search maps them at once
            status = brain.status()
    stopped = stop.is_set() and (
        report.stopped or bool(status.pending_vectors) or bool(status.strong_pending)
    )
    result = {
        **dataclasses.asdict(report),
        "vectors_written": vectors,
        "pending_vectors": status.pending_vectors,
        "strong_vectors_written": strong,
        "strong_pending": status.strong_pending,
        "calibrated": calibrated,
        "last_error": status.last_error,
        "stopped": stopped,
    }
    if json_out:
        _dump(result)
    else:
        typer.echo(
            f"{report.scanned} notes scanned: {report.added} added, {report.updated} updated, "
            f"{report.removed} removed, {report.skipped} skipped ({report.ms / 1000:.1f} s); "
            f"{vectors} vectors written"
            + (f", {status.pending_vectors} pending" if status.pending_vectors else "")
            + (f"; {strong} multilingual vectors written" if strong else "")
            + (f", {status.strong_pending} pending" if status.strong_pending else "")
        )
    if status.embed_error:
        typer.echo(f"embedding: {status.embed_error} (full-text search still works)", err=True)
    if status.summary_error:
        typer.echo(f"summaries: {status.summary_error} (extractive leads meanwhile)", err=True)
    if stopped:
        typer.echo(f"vault-brain: stopped: {_where_it_stopped(report, status)}", err=True)
        raise typer.Exit(130)


@contextmanager
def _ctrl_c_stops():
    """Ctrl-C (SIGINT) asks the work to stop after its current batch, instead of killing it
    mid-write: the Event it yields is set. A second Ctrl-C quits at once (exit 130)."""
    import signal
    import threading

    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_signal(_signum: int, _frame: object) -> None:
        signal.signal(signal.SIGINT, previous)
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _sync_phases(brain: Any, phases: Any, full: bool, stop: Any) -> Any:
    """The pass over the files as two phases: scan (count the files, compare with the
    index) and parse (read, chunk and store the new and changed ones)."""
    from vault_brain.meter import duration

    scan = phases.phase("scan", "files", verb="scanned")
    parse = None

    def scanned(to_parse: str) -> None:
        m = scan.meter
        scan.finish(f"scanned {m.done:,} files in {duration(m.elapsed())} ({to_parse})")

    def progress(p: Any) -> None:
        nonlocal parse
        if p.phase == "scan" and p.total:
            scan.update(p.done, p.total)
        elif p.phase == "parse":
            if parse is None:
                scanned(f"{p.total:,} new or changed")
                parse = phases.phase("parse", "files", p.total, verb="parsed")
            parse.update(p.done)

    report = brain.sync(full=full, progress=progress, stop=stop)
    changes = f"{report.added:,} added, {report.updated:,} updated, {report.removed:,} removed"
    if report.vectors:
        changes += f"; {report.vectors:,} chunks' vectors made with them"
    if parse is None:
        scanned("none new or changed" + (f"; {report.removed:,} removed" if report.removed else ""))
    else:
        parse.finish(more=f": {changes}")
    return report


def _vector_phase(brain: Any, phases: Any, stop: Any, *, strong: bool) -> int:
    """The vectors the index lacks, one tier at a time, in batches (Ctrl-C stops between
    two): the instant tier (or the configured remote model), then the multilingual e5
    tier. The bar counts chunks with vectors of all chunks; the rate is this run's."""
    if stop.is_set():
        return 0
    st = brain.status()
    if strong:
        pending, done, label = st.strong_pending, st.strong_vectors, "e5 vectors"
    else:
        pending, done, label = st.pending_vectors, st.vectors, "vectors"
    if not pending or (strong and not st.strong_model):
        return 0
    phase = phases.phase(label, "chunks", done + pending, done=done)
    written = 0
    while not stop.is_set():
        if strong:
            n = brain.embed_strong(limit=64)  # about a second of e5: Ctrl-C answers soon
        else:
            n = brain.embed_pending(limit=1024, strong=False)
        if n == 0:
            break
        written += n
        phase.update(done + written)
    left = pending - written
    phase.finish(more=f", {left:,} left" if left > 0 else "")
    return written


def _calibrate_phase(brain: Any, phases: Any) -> list[str]:
    """The vault's calibration, when due (a few seconds; the first time it embeds a bank
    of questions): shown like a phase, and a line when it fitted a tier."""
    from vault_brain.meter import duration

    phase = phases.phase("calibrate", "tiers")
    fitted = brain.calibrate()
    if fitted:
        took = duration(phase.meter.elapsed())
        phase.finish(f"calibrated the {' and '.join(fitted)} vectors in {took}")
    else:
        phase.drop()
    return fitted


def _where_it_stopped(report: Any, st: Any) -> str:
    """What an interrupted `index` leaves, and how to go on."""
    parts = [f"indexed {st.notes:,} of {report.scanned:,} files"]
    if st.embedding:
        parts.append(f"{st.vectors:,} of {st.chunks:,} vectors")
    if st.strong_model:
        parts.append(f"{st.strong_vectors:,} of {st.chunks:,} e5 vectors")
    return "; ".join(parts) + "; run `vault-brain index` again to continue where it stopped"


app.command("reindex", help="Alias of `index`.")(index)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for, in plain words.")],
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            "-n",
            min=LIMIT_RANGE[0],
            max=LIMIT_RANGE[1],
            help="Results (default: search.limit).",
        ),
    ] = None,
    mode: Annotated[str | None, typer.Option(help="hybrid | fts | vector")] = None,
    tag: Annotated[
        list[str] | None,
        typer.Option("--tag", help="Only notes with this tag (repeat for several)."),
    ] = None,
    folder: Annotated[str | None, typer.Option(help="Only notes in this folder.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only notes updated since: 2026-11-30, 7d, 24h.")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only notes updated until: a date or 7d.")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each arm's rank and score per hit.")
    ] = False,
    min_score: Annotated[
        float | None,
        typer.Option(
            "--min-score",
            min=MIN_SCORE_RANGE[0],
            max=MIN_SCORE_RANGE[1],
            help="Hide hits scoring lower (default: search.min_score).",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=MAX_TOKENS_MIN,
            help=(
                "Print at most this many cl100k tokens: the best hits whole, then as much of "
                "the next as fits (up to 50 hits when --limit is not given)."
            ),
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Search the vault: a running watch or serve answers it (its models are loaded), else
    this process does, syncing first when no watcher keeps the index fresh, and then
    leaves a warm resident in the background that answers the next searches fast (a stat
    pass first, as here); it exits after search.keep_warm seconds (300) without one.
    The first search pays in full. Turn the resident off with search.keep_warm = 0 in a
    config.toml, or VAULT_BRAIN_SEARCH_KEEP_WARM=0."""
    cli_search.run(
        query,
        vault,
        config,
        limit,
        mode,
        tag,
        folder,
        since,
        until,
        explain,
        min_score,
        max_tokens,
        json_out,
    )


@app.command("resident", hidden=True)
def resident_(vault: VaultOpt = None, config: ConfigOpt = None) -> None:
    """The warm resident that `search` starts in the background (not for typing)."""
    settings = settings_for(vault, config)
    from vault_brain import resident

    resident.run(settings)


@app.command()
def get(
    ref: Annotated[
        str, typer.Argument(metavar="ID_OR_PATH", help="A note id or vault-relative path.")
    ],
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one note in full, with its version, tags, links, backlinks and related notes."""
    settings = settings_for(vault, config)
    log.use_human_output()
    with open_brain(settings) as brain, typed_values():
        brain.refresh_if_unwatched(vectors=False)
        try:
            view = brain.get(ref)
        except NotFound as exc:
            raise fail(exc.message, 1) from None
    if json_out:
        _dump(plain(view))
        return
    typer.echo(f"# {view.title}")
    typer.echo(f"id: {view.id}  path: {view.path}  version: {view.version}")
    if view.tags:
        typer.echo("tags: " + ", ".join(view.tags))
    if view.summary:
        typer.echo(f"summary: {view.summary}")
    typer.echo("")
    typer.echo(view.content)
    if view.links_out:
        typer.echo("links: " + ", ".join(r.title for r in view.links_out))
    if view.backlinks:
        typer.echo("backlinks: " + ", ".join(r.title for r in view.backlinks))
    if view.related:
        typer.echo("related:")
        for r in view.related:
            typer.echo(f"  {r.title} ({r.id})" + (f": {r.summary}" if r.summary else ""))


@app.command()
def history(
    ref: Annotated[
        str,
        typer.Argument(
            metavar="REF", help="A note (id, path, title) or the path of one that is gone."
        ),
    ],
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the versions of a note that vault-brain writes replaced (newest first)."""
    settings = settings_for(vault, config)
    log.use_human_output()
    with open_brain(settings) as brain, typed_values():
        path, versions = brain.history(ref)
    if json_out:
        _dump({"path": path, "versions": [dataclasses.asdict(v) for v in versions]})
        return
    if not versions:
        typer.echo(f"{path}: no kept versions (vault-brain has not replaced this note)")
        return
    typer.echo(f"{path}: {len(versions)} kept versions, newest first")
    for v in versions:
        typer.echo(f"  {v.name}  saved {v.saved_at}  version {v.version}  {_size(v.size)}")
    typer.echo(f"restore one with: vault-brain restore {_quote(path)} NAME")


@app.command()
def restore(
    ref: Annotated[str, typer.Argument(metavar="REF", help="The note, as for `history`.")],
    name: Annotated[str, typer.Argument(help="A version's NAME from `vault-brain history`.")],
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Put a kept version of a note back (what it replaces is kept in turn)."""
    settings = settings_for(vault, config)
    log.use_human_output()
    with open_brain(settings) as brain, typed_values():
        path, _ = brain.history(ref)
        current = brain.current_version(path)
        result = brain.restore(path, name, version=current)
    if json_out:
        _dump(plain(result))
        return
    typer.echo(f"restored {path} from {name} (version {result.version})")


def _quote(text: str) -> str:
    return f'"{text}"' if any(ch.isspace() for ch in text) else text


@app.command("import")
def import_(
    fmt: Annotated[
        str, typer.Argument(metavar="FORMAT", help="claude | chatgpt | jsonl", show_default=False)
    ],
    files: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...",
            help="conversations.json (or the export's .zip) for claude and chatgpt; "
            "chat logs with one JSON message per line for jsonl.",
            show_default=False,
        ),
    ],
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    folder: Annotated[
        str | None,
        typer.Option(help='Folder for new notes (default: Conversations; "" = the vault root).'),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be written; write nothing.")
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="Append a conversation to the existing note whose topic it matches (the "
            "score and threshold show with --dry-run), instead of a note of its own.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Turn chat exports into notes: one per conversation, with mentions of your notes made
    wikilinks. Importing again adds only new messages. Exit code 2: an export that cannot
    be read (nothing is written)."""
    settings = settings_for(vault, config)
    log.use_human_output()
    with open_brain(settings) as brain:
        try:
            report = brain.import_conversations(
                fmt, files, folder=folder, dry_run=dry_run, merge=merge
            )
        except InvalidExport as exc:
            raise fail(exc.message, 2) from None
    if json_out:
        _dump(dataclasses.asdict(report))
    else:
        _print_import(report)
    for warning in report.warnings:
        typer.echo(f"warning: {warning}", err=True)
    for error in report.errors:
        typer.echo(f"vault-brain: {error}", err=True)
    if report.errors:
        raise typer.Exit(1)


_IMPORT_VERBS = {
    "create": "new",
    "append": "append",
    "merge": "merge",
    "unchanged": "same",
    "empty": "skip",
}


def _print_import(report: Any) -> None:
    """One line per conversation: what happens to it, where, and why."""
    for o in report.outcomes:
        if o.action == "create":
            detail = f"{o.messages} message{'' if o.messages == 1 else 's'}"
        elif o.action == "unchanged":
            detail = "already imported"
        elif o.action == "empty":
            detail = "no messages"
        else:
            detail = f"+{o.messages} of {o.total} messages"
        if o.score is not None:
            sign = ">=" if o.score >= report.threshold else "<"
            detail += (
                f"; best match {o.candidate} scored {o.score:.2f} {sign} "
                f"threshold {report.threshold:.2f}"
            )
        typer.echo(f"{_IMPORT_VERBS[o.action]:<7} {o.path or o.title}  ({detail})")
    n = len(report.outcomes)
    counted = f"{n} conversation{'' if n == 1 else 's'}"
    if report.dry_run:
        typer.echo(f"dry run: {counted}, nothing written")
    else:
        w = report.notes_written
        typer.echo(f"{counted}: {w} note{'' if w == 1 else 's'} written")


@app.command()
def status(vault: VaultOpt = None, config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Counts, pending work, the models and the index size; the e5 tier's pace and time left
    while a process embeds it; who holds the index (a watcher or server that keeps it in
    step, or an `index` run in progress, with its pid); the warm resident a search left,
    when one runs (its pid, since when, its idle limit)."""
    settings = settings_for(vault, config)
    log.use_human_output()
    with open_brain(settings) as brain:
        st = brain.status()
    from vault_brain import warm

    answering = warm.ask_info(settings)
    resident = answering if answering and answering.get("kind") == "resident" else None
    if json_out:
        _dump({**plain(st), "resident": resident})
        return
    for key, value in _status_lines(st) + _resident_lines(resident):
        typer.echo(f"{key:<12} {value}")


def _resident_lines(info: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The warm resident a search left (vault_brain/resident.py), when one runs."""
    if info is None:
        return []
    import time

    since = time.strftime("%H:%M:%S", time.localtime(info["since"]))
    idle = f"; exits when idle for {info['keep_warm']} s" if info.get("keep_warm") else ""
    answered = info.get("answered", 0)
    return [
        (
            "warm",
            f"a resident (pid {info['pid']}, since {since}) answers CLI searches "
            f"({answered} so far){idle}",
        )
    ]


_TIER_WORDS = {
    "instant": "the instant vectors (the multilingual ones take over once they are fitted)",
    "strong": "the multilingual vectors",
    "instant+strong": "the instant and the multilingual vectors together (every note's lead "
    "is in; the multilingual ones answer alone at full coverage)",
}


def _status_lines(st: Any) -> list[tuple[str, str]]:
    """`status` for a person: words and units; `--json` keeps the raw values."""
    lines = [
        ("vault", st.vault),
        ("index", f"{st.index_path} ({_size(st.index_bytes)})"),
        ("notes", f"{st.notes:,} in {st.chunks:,} chunks"),
    ]
    if st.indexing:
        lines.append(("indexing", f"{st.indexing.done:,} of {st.indexing.total:,} files so far"))
    if st.embedding:
        dims = f", {st.dimension} dimensions" if st.dimension else ""
        pending = f", {st.pending_vectors:,} pending" if st.pending_vectors else ""
        lines.append(("vectors", f"{st.vectors:,} from {st.embedding}{dims}{pending}"))
    else:
        lines.append(("vectors", "off (embed.provider = none): full-text search only"))
    if st.strong_model:
        total = st.strong_vectors + st.strong_pending
        share = f"{st.strong_vectors:,} of {total:,} chunks" if total else "no chunks yet"
        pace = ""
        if st.strong_rate:
            from vault_brain.meter import per_second, time_left

            left = st.strong_eta_seconds
            pace = f" ({per_second(st.strong_rate, 'chunks')}" + (
                f", {time_left(left)})" if left is not None else ")"
            )
        lines.append(("multilingual", f"{share} from {st.strong_model}{pace}"))
        if st.vector_tier:
            lines.append(("searches read", _TIER_WORDS.get(st.vector_tier, st.vector_tier)))
        if st.strong_kernel:
            agreement = f", agreement {st.strong_agreement:.4f}" if st.strong_agreement else ""
            lines.append(
                ("kernel", f"{st.strong_kernel} (checked against the reference{agreement})")
            )
    if st.summary_model:
        pending = f", {st.pending_summaries:,} pending" if st.pending_summaries else ""
        lines.append(("summaries", f"by {st.summary_model}{pending}"))
    else:
        lines.append(("summaries", "first lines of each note (no summarizer configured)"))
    pid = f" (pid {st.indexer_pid})" if st.indexer_pid else ""
    if st.indexer:
        fresh = "this process watches the vault"
    elif st.indexer_role == "index":
        fresh = (
            f"an `index` run is in progress{pid}; after it, nothing watches the vault "
            "(search and get refresh it first)"
        )
    elif st.watched:
        fresh = f"a running vault-brain watch or serve{pid} keeps it in step"
    elif st.indexer_role == "refresh":
        fresh = f"nothing watches the vault; a search or get{pid} is refreshing it now"
    else:
        fresh = "nothing watches the vault; search and get refresh it first"
    lines.append(("kept fresh", fresh))
    for label, error in (("embedding", st.embed_error), ("summaries", st.summary_error)):
        if error:
            lines.append(("error", f"{label}: {error}"))
    return lines


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:,.0f} {unit}" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{n} bytes"


@app.command()
def watch(
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    poll: Annotated[
        bool, typer.Option("--poll", help="Poll instead of native events (network drives, WSL).")
    ] = False,
    debounce: Annotated[
        int | None,
        typer.Option("--debounce", metavar="MS", help="Quiet time per path before syncing."),
    ] = None,
) -> None:
    """Keep the index in step with the vault until Ctrl-C (JSON log lines on stderr; the e5
    backlog's: strong_backlog_started, strong_progress every 30 s, strong_backlog_done)."""
    overrides: dict[str, Any] = {"poll": poll or None, "debounce_ms": debounce}
    settings = settings_for(
        vault, config, watch={k: v for k, v in overrides.items() if v is not None}
    )
    from vault_brain import warm

    with open_brain(settings, one_shot=False) as brain:

        def start() -> Any:
            stop_watching = brain.start_watching()
            stop_answering = warm.listen(brain)  # CLI searches ask this process

            def stop() -> None:
                stop_answering()
                stop_watching()

            return stop

        _run_until_signal(start)
    raise typer.Exit(0)


def _run_until_signal(start_watching: Any) -> None:
    """Watch until SIGINT/SIGTERM, then stop cleanly (pending paths are synced first).
    The handlers are in place before watching starts, so an early signal still stops
    cleanly. A second signal while stopping falls back to the default: Ctrl-C twice kills."""
    import signal
    import time

    previous: dict[int, Any] = {}
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        # No logging and no locks here: the handler runs on the main thread wherever it
        # was, perhaps inside a log write or an Event's own lock. The line is written once
        # the loop below sees the signal.
        received.append(signum)
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.getsignal(sig)
        signal.signal(sig, on_signal)
    stop_watching = start_watching()
    try:
        # The kernel may hand the signal to any thread (the observer's, a worker's), and
        # Python runs the handler only when the main thread next runs: an untimed wait on a
        # lock slept through it (a watcher that never stopped). A short sleep wakes anyway.
        while not received:
            time.sleep(0.2)
        log.event("watch_signal", signal=signal.Signals(received[0]).name)
    finally:
        stop_watching()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@app.command()
def serve(
    vault: VaultOpt = None,
    config: ConfigOpt = None,
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="MCP over stdin/stdout (Claude Desktop, Claude Code, Cursor)."
        ),
    ] = False,
    http: Annotated[
        bool,
        typer.Option("--http", help="MCP Streamable HTTP at /mcp (Open WebUI, shared servers)."),
    ] = False,
    host: Annotated[
        str | None, typer.Option(help="HTTP bind address (default: server.host, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="HTTP port (default: server.port, 8080).")
    ] = None,
) -> None:
    """Serve the six memory tools over MCP (and keep the index in step with the vault)."""
    if stdio == http:
        raise fail("choose one of --stdio or --http", 2)
    server = {k: v for k, v in {"host": host, "port": port}.items() if v is not None}
    settings = settings_for(vault, config, server=server)
    from vault_brain import server as mcp_server

    try:
        if stdio:
            mcp_server.run_stdio(settings)
        else:
            mcp_server.run_http(settings)
    except ConfigError as exc:
        raise fail(exc.message, 2) from None
    except VaultBrainError as exc:  # e.g. the port is in use
        raise fail(exc.message, 1) from None


@app.command()
def trust(
    vault: VaultOpt = None,
    revoke: Annotated[bool, typer.Option("--revoke", help="Forget the trust instead.")] = False,
) -> None:
    """Trust the vault's own .vault-brain/config.toml as it is now, so that it may set what a
    vault's config alone may not: endpoints that receive note text, the server's address and
    token, an index outside the vault. Its hash is recorded in your config folder; editing
    the file later needs a new trust."""
    from vault_brain.config import revoke_trust, trust_vault_config

    target = vault or os.environ.get("VAULT_BRAIN_VAULT")
    if not target:
        raise fail("no vault given (use --vault PATH or VAULT_BRAIN_VAULT)", 2)
    try:
        if revoke:
            gone = revoke_trust(target)
            typer.echo(f"no longer trusted: {gone.config}" if gone else "it was not trusted")
            return
        report = trust_vault_config(target)
    except ConfigError as exc:
        raise fail(exc.message, 2) from None
    for line in report.needs_trust:
        typer.echo(f"  {line}")
    typer.echo(
        f"trusted {report.config} (sha256 {report.sha256[:12]}), recorded in {report.record}"
    )


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"vault-brain {__version__}")
        raise typer.Exit(0)


def _app_for(args: list[str]) -> typer.Typer:
    """The command line for these arguments. When they start with a command's name, only
    that command is built: typer reads every command's signature and type hints to build
    the whole tree, 10 of a one-shot search's CPU-ms. Anything else (no command, an option
    first, a misspelt name) gets the whole tree, with its help and suggestions."""
    if not args or args[0].startswith("-"):
        return app
    chosen = [c for c in app.registered_commands if _command_name(c) == args[0]]
    if not chosen:
        return app
    lean = copy.copy(app)  # the same settings, callback (--version) and help
    lean.registered_commands = chosen
    return lean


def _command_name(command: Any) -> str:
    if command.name:
        return str(command.name)
    return str(command.callback.__name__).replace("_", "-")


def main() -> None:
    try:
        _app_for(sys.argv[1:])()
    except KeyboardInterrupt:
        sys.exit(130)
    except SystemExit as exc:
        # A reader that stopped early (`vault-brain get … | head -1`) is not an error: click
        # and typer answer a broken pipe by muting stdout with a PacifyFlushWrapper and
        # exiting 1; that wrapper is the sign, and the exit is 0.
        if exc.code == 1 and "PacifyFlushWrapper" in type(sys.stdout).__name__:
            sys.exit(0)
        raise


if __name__ == "__main__":
    main()
