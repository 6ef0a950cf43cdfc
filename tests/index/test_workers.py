"""The parse worker pool: answers in order, the same as parsing in this process, and no
worker or reader thread left behind however a pass ends."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from vault_brain.config import load_settings
from vault_brain.index.prepare import prepare
from vault_brain.index.workers import CHUNK, ParsePool, WorkerError
from vault_brain.vault.scan import scan_vault

NOTES = CHUNK * 7 + 5  # messages to every worker, and a short last one


def _vault(root: Path) -> list:
    for n in range(NOTES):
        body = f"# Note {n}\n\nSome words about [[Note {n + 1}]] and #tag{n % 3}.\n" * (1 + n % 9)
        (root / f"Note {n:03}.md").write_text(f"---\ntags: [t{n % 5}]\n---\n{body}", "utf-8")
    return [(stat, None) for stat in scan_vault(root).files]


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "parse-worker-reader"]


@pytest.fixture
def jobs_and_settings(tmp_path):
    root = tmp_path / "vault"
    root.mkdir()
    jobs = _vault(root)
    return jobs, load_settings(vault=str(root), env={})


def test_workers_answer_in_order_what_this_process_would(jobs_and_settings):
    jobs, settings = jobs_and_settings
    with ParsePool((settings, False, None), 2) as pool:
        got = list(pool.map(jobs))
    expected = [prepare(settings.vault_path, s, h, settings, False) for s, h in jobs]
    assert got == expected
    assert not _readers()


def test_a_pass_stopped_early_leaves_no_worker_and_no_reader(jobs_and_settings):
    jobs, settings = jobs_and_settings
    with ParsePool((settings, False, None), 2) as pool:
        procs = list(pool._procs)
        answers = pool.map(jobs)
        first = next(answers)
        answers.close()  # the indexer stops after its current batch (Ctrl-C)
    assert first.stat == jobs[0][0]
    assert all(proc.poll() is not None for proc in procs)
    assert not _readers()


def test_a_worker_that_dies_is_a_worker_error_not_a_hang(jobs_and_settings):
    jobs, settings = jobs_and_settings
    with ParsePool((settings, False, None), 2) as pool:
        answers = pool.map(jobs)
        next(answers)
        for proc in pool._procs:
            proc.kill()
        with pytest.raises(WorkerError):
            list(answers)
    assert not _readers()


CHATTY = (
    "import threading\n"
    "def chatter():\n"
    "    while True:\n"
    "        print('a library says hello on stdout', flush=True)\n"
    "        threading.Event().wait(0.005)\n"
    "threading.Thread(target=chatter, daemon=True).start()\n"
)


def test_a_library_printing_while_a_worker_starts_corrupts_no_answer(
    jobs_and_settings, tmp_path, monkeypatch
):
    """Output printed on stdout before the worker has moved fd 1 to stderr (a sitecustomize,
    an import) is passed on to stderr; the answers after it are read whole."""
    jobs, settings = jobs_and_settings
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CHATTY, encoding="utf-8")
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{repo}")
    with ParsePool((settings, False, None), 2) as pool:
        got = list(pool.map(jobs))
    assert got == [prepare(settings.vault_path, s, h, settings, False) for s, h in jobs]
