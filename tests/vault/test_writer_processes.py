"""Invariant 2 across processes: two servers on one vault, and a person's editor saving
while a model updates. Real spawned processes, bounded loops, counts reported."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from tests.vault import race_workers
from tests.waiting import HANG_SECONDS
from vault_brain.vault import history
from vault_brain.vault.note import file_version

# Race loops of spawned processes: the slow tail.
pytestmark = pytest.mark.slow

# VB_RACE_SCALE=5 runs five times the rounds (for the figures in a report).
RACE_SCALE = float(os.environ.get("VB_RACE_SCALE", "1"))
ROUNDS = round(200 * RACE_SCALE)
EDITOR_ROUNDS = round(200 * RACE_SCALE)
DELETE_ROUNDS = round(100 * RACE_SCALE)
# A long note (a journal, a pasted log): reading and hashing it before the rename takes a
# while, which is where a save slips in.
FILLER = b"A line of an old journal entry that goes on for a while.\n" * 20_000


def _context():  # spawn: the way a second server really starts, on every OS
    return multiprocessing.get_context("spawn")


def test_two_processes_updating_one_version_have_exactly_one_winner(tmp_path: Path) -> None:
    root = tmp_path / "vault"
    root.mkdir()
    ctx = _context()
    barrier = ctx.Barrier(2)
    jobs = [ctx.Queue(), ctx.Queue()]
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=race_workers.replacer, args=(str(root), ROUNDS, i, barrier, jobs[i], results)
        )
        for i in range(2)
    ]
    for p in procs:
        p.start()
    lost = 0
    both_refused = 0
    try:
        for r in range(ROUNDS):
            rel = f"Round {r}.md"
            base = f"round {r} as the person left it\n".encode()
            (root / rel).write_bytes(base)
            for q in jobs:
                q.put((rel, file_version(base)))
            outcome = {}
            for _ in range(2):
                got_rel, who, what = results.get(timeout=HANG_SECONDS)
                assert got_rel == rel
                outcome[who] = what
            winners = [who for who, what in outcome.items() if what == "won"]
            if len(winners) > 1:
                lost += 1
            elif not winners:
                both_refused += 1
            else:
                expected = f"process {winners[0]} wrote {rel}\n".encode()
                if (root / rel).read_bytes() != expected:
                    lost += 1
    finally:
        for p in procs:
            p.join(HANG_SECONDS)
            if p.is_alive():
                p.kill()
    print(f"\ntwo-process replace: {lost} lost, {both_refused} both refused, of {ROUNDS} rounds")
    assert (lost, both_refused) == (0, 0), f"{lost} updates lost of {ROUNDS} rounds"


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "rename"])
@pytest.mark.parametrize("style", ["in-place", "temp+rename"])
def test_an_editor_save_racing_an_update_is_never_unrecoverable(
    tmp_path: Path, style: str, exchange: bool
) -> None:
    """Each round a person's editor saves a long note while a model updates it. A human
    line missing from the note afterwards must be in the note's history."""
    root = tmp_path / "vault"
    root.mkdir()
    ctx = _context()
    barrier = ctx.Barrier(2)
    editor_jobs, updater_jobs, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(
            target=race_workers.editor,
            args=(str(root), EDITOR_ROUNDS, style, barrier, editor_jobs, results),
        ),
        ctx.Process(
            target=race_workers.updater,
            args=(str(root), EDITOR_ROUNDS, exchange, barrier, updater_jobs, results),
        ),
    ]
    for p in procs:
        p.start()
    overwritten = unrecoverable = updated = 0
    try:
        for r in range(EDITOR_ROUNDS):
            rel = f"Note {r}.md"
            marker = f"human line {r}".encode()
            (root / rel).write_bytes(f"# Note {r}\n\n".encode() + FILLER)
            editor_jobs.put((rel, marker.decode()))
            updater_jobs.put(rel)
            for _ in range(2):
                got = results.get(timeout=HANG_SECONDS)
                assert got[0] == rel
                updated += got[1] == "updated"
            if marker in (root / rel).read_bytes():
                continue
            overwritten += 1
            kept = [
                history.read_version(root, rel, v.name) for v in history.list_versions(root, rel)
            ]
            if not any(marker in data for data in kept):
                unrecoverable += 1
    finally:
        for p in procs:
            p.join(HANG_SECONDS)
            if p.is_alive():
                p.kill()
    print(
        f"\neditor {style} vs update ({'exchange' if exchange else 'rename'}): {updated} "
        f"updates landed, {overwritten} of {EDITOR_ROUNDS} human saves overwritten, "
        f"{unrecoverable} unrecoverable"
    )
    assert unrecoverable == 0, f"{unrecoverable} of {EDITOR_ROUNDS} human saves lost"


@pytest.mark.parametrize("style", ["in-place", "temp+rename"])
def test_an_editor_save_racing_a_delete_stays_in_the_vault_or_the_trash(
    tmp_path: Path, style: str
) -> None:
    """A delete names the version read; a save that lands meanwhile is never lost: it is
    at the note's path (the delete refused) or, written into a file already moved, in
    the trash."""
    root = tmp_path / "vault"
    root.mkdir()
    ctx = _context()
    barrier = ctx.Barrier(2)
    editor_jobs, deleter_jobs, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(
            target=race_workers.editor,
            args=(str(root), DELETE_ROUNDS, style, barrier, editor_jobs, results, True),
        ),
        ctx.Process(
            target=race_workers.deleter,
            args=(str(root), DELETE_ROUNDS, barrier, deleter_jobs, results),
        ),
    ]
    for p in procs:
        p.start()
    deleted = saved = lost = 0
    try:
        for r in range(DELETE_ROUNDS):
            rel = f"Note {r}.md"
            marker = f"human line {r}".encode()
            (root / rel).write_bytes(f"# Note {r}\n\n".encode() + FILLER)
            editor_jobs.put((rel, marker.decode()))
            deleter_jobs.put(rel)
            outcomes = set()
            for _ in range(2):
                got = results.get(timeout=HANG_SECONDS)
                assert got[0] == rel
                outcomes.add(got[1])
            deleted += "deleted" in outcomes
            if "saved" not in outcomes:
                continue  # the note was already in the trash when the editor looked
            saved += 1
            places = [root / rel, *sorted((root / ".trash").glob(f"Note {r}*.md"))]
            if not any(p.exists() and marker in p.read_bytes() for p in places):
                lost += 1
    finally:
        for p in procs:
            p.join(HANG_SECONDS)
            if p.is_alive():
                p.kill()
    print(
        f"\neditor {style} vs delete: {deleted} deletes landed, {saved} human saves, "
        f"{lost} lost, of {DELETE_ROUNDS} rounds"
    )
    assert lost == 0
