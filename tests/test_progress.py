"""Progress on a big vault, as a person at a terminal and a script see it (issue 25, item 4):
each phase of `index` with its own unit, a summary line per phase that stays, Ctrl-C that
stops cleanly and a second `index` that continues, `status` that tells an index run from
a watcher, and a watcher that tells its e5 backlog. Real processes on real vaults; every
wait is for an event, with a generous deadline."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.terminal import Terminal, write_notes
from tests.waiting import HANG_SECONDS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX terminal")

NO_VECTORS = {"VAULT_BRAIN_EMBED_PROVIDER": "none"}
NO_E5 = {"VAULT_BRAIN_EMBED_STRONG": "none"}
CONTINUE = "run `vault-brain index` again to continue where it stopped"


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=900,
    )


def vault_of(tmp_path: Path, notes: int) -> Path:
    root = tmp_path / "vault"
    write_notes(root, notes)
    return root


def matching(pattern: str, lines: list[str]) -> list[str]:
    return [line for line in lines if re.fullmatch(pattern, line)]


def test_index_on_a_terminal_leaves_one_summary_line_per_phase_and_no_bar(tmp_path):
    vault = vault_of(tmp_path, 40)
    term = Terminal("index", "--vault", str(vault), env=NO_E5)
    try:
        assert term.wait() == 0, term.text
    finally:
        term.close()
    screen = term.screen()
    assert matching(r"scanned 40 files in [\d.]+ s \(40 new or changed\)", screen), screen
    assert matching(
        r"parsed 40 files in [\d.]+ s \([\d.,]+ files/s\): 40 added, 0 updated, 0 removed",
        screen,
    ), screen
    assert matching(r"vectors: 40 chunks in [\d.]+ s \([\d.,]+ chunks/s\)", screen), screen
    assert not [line for line in screen if "━" in line], screen  # no bar left behind
    assert any(line.startswith("40 notes scanned: 40 added") for line in screen), screen


def test_index_without_a_terminal_prints_plain_lines_and_the_same_json(tmp_path):
    vault = vault_of(tmp_path, 30)
    r = run("index", "--vault", str(vault), "--json", env=NO_E5)
    assert r.returncode == 0, r.stderr
    assert "\x1b[" not in r.stderr and "━" not in r.stderr, r.stderr
    lines = r.stderr.splitlines()
    assert matching(r"scanned 30 files in [\d.]+ s \(30 new or changed\)", lines), lines
    assert matching(r"parsed 30 files in .*files/s\): 30 added, 0 updated, 0 removed", lines)
    assert matching(r"vectors: 30 chunks in .*chunks/s\)", lines), lines
    out = json.loads(r.stdout)
    before = {  # the shape scripts read: fields are only ever added
        "scanned",
        "added",
        "updated",
        "removed",
        "unchanged",
        "skipped",
        "ms",
        "vectors_written",
        "pending_vectors",
        "strong_vectors_written",
        "strong_pending",
        "last_error",
    }
    assert before <= set(out)
    assert out["added"] == 30 and out["vectors_written"] == 30 and out["stopped"] is False


def test_ctrl_c_while_parsing_keeps_what_is_stored_and_a_second_index_adds_the_rest(tmp_path):
    total = 2500
    vault = vault_of(tmp_path, total)
    term = Terminal("index", "--vault", str(vault), env=NO_VECTORS)
    try:
        term.wait_for(r"parse\s+\S+\s+[1-9][\d,]*/2,500 files")
        term.ctrl_c()
        code = term.wait()
    finally:
        term.close()
    assert code == 130, term.text
    stopped = re.search(
        r"vault-brain: stopped: indexed ([\d,]+) of 2,500 files; " + re.escape(CONTINUE),
        term.text,
    )
    assert stopped, term.text
    first = int(stopped[1].replace(",", ""))
    assert 0 < first < total
    screen = term.screen()
    assert matching(rf"parsed {first:,} of 2,500 files in .*: {first:,} added.*", screen), screen
    # The parse workers got the Ctrl-C too; they leave it to the indexer, quietly.
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text, term.text

    second = run("index", "--vault", str(vault), "--json", env=NO_VECTORS)
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert out["added"] + first == total and out["unchanged"] == first, out
    assert json.loads(run("status", "--vault", str(vault), "--json").stdout)["notes"] == total


def test_ctrl_c_during_e5_stops_after_the_batch_and_a_second_index_embeds_only_the_rest(
    tmp_path,
):
    vault = vault_of(tmp_path, 200)
    term = Terminal("index", "--vault", str(vault))
    try:
        term.wait_for(r"e5 vectors\s+\S+\s+[1-9][\d,]*/200 chunks", timeout=900)
        term.ctrl_c()
        code = term.wait()
    finally:
        term.close()
    assert code == 130, term.text
    stopped = re.search(
        r"vault-brain: stopped: indexed 200 of 200 files; 200 of 200 vectors; "
        r"(\d+) of 200 e5 vectors; " + re.escape(CONTINUE),
        term.text,
    )
    assert stopped, term.text
    e5_done = int(stopped[1])
    assert 0 < e5_done < 200
    screen = term.screen()
    assert matching(r"vectors: 200 chunks in .*chunks/s\)", screen), screen
    assert matching(
        rf"e5 vectors: {e5_done} of 200 chunks in .*chunks/s\), {200 - e5_done} left", screen
    ), screen

    second = run("index", "--vault", str(vault), "--json")
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert out["added"] == 0 and out["vectors_written"] == 0, out
    assert out["strong_vectors_written"] == 200 - e5_done, out  # none done twice
    assert out["strong_pending"] == 0 and out["stopped"] is False


def test_status_during_an_index_run_names_the_run_and_a_second_index_waits_for_it(tmp_path):
    vault = vault_of(tmp_path, 2500)
    term = Terminal("index", "--vault", str(vault), env=NO_VECTORS)
    pid = term.proc.pid
    try:
        term.wait_for(r"parse\s+\S+\s+[1-9][\d,]*/2,500 files")
        os.kill(pid, signal.SIGSTOP)  # held mid-pass, the indexer role with it
        try:
            text = run("status", "--vault", str(vault), env=NO_VECTORS)
            st = json.loads(run("status", "--vault", str(vault), "--json", env=NO_VECTORS).stdout)
            again = run("index", "--vault", str(vault), env=NO_VECTORS)
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        term.close()
    assert text.returncode == 0, text.stderr
    assert f"an `index` run is in progress (pid {pid})" in text.stdout, text.stdout
    assert "keeps it in step" not in text.stdout
    assert st["indexer_role"] == "index" and st["indexer_pid"] == pid
    assert st["watched"] is False
    assert again.returncode == 1
    assert f"a `vault-brain index` run (pid {pid}) is indexing this vault" in again.stderr


class Watch:
    """`vault-brain watch` with the default models, its JSON log lines followed."""

    def __init__(self, vault: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vault_brain", "watch", "--vault", str(vault)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(record)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, name: str, timeout: float = 900) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if event.get("event") == name:
                        return event
                if time.monotonic() > deadline or not self._reader.is_alive():
                    raise AssertionError(f"no {name}: {self.events[-5:]}")
                self._cond.wait(0.5)

    def close(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(HANG_SECONDS)
        self._reader.join(HANG_SECONDS)
        return self.proc.returncode


def test_watch_tells_its_e5_backlog_and_status_shows_the_pace_while_it_works(tmp_path):
    notes = 320
    vault = vault_of(tmp_path, notes)
    watch = Watch(vault)
    pid = watch.proc.pid
    try:
        started = watch.wait_for("strong_backlog_started")
        assert started["done"] == 0 and started["pending"] == started["total"] > 64
        pace = watch.wait_for("strong_progress")
        assert pace["chunks_per_s"] > 0 and pace["eta_s"] is not None
        assert 0 < pace["done"] < notes and pace["total"] == notes
        os.kill(pid, signal.SIGSTOP)  # held while it works: its record must be there
        try:
            st = json.loads(run("status", "--vault", str(vault), "--json").stdout)
            text = run("status", "--vault", str(vault)).stdout
        finally:
            os.kill(pid, signal.SIGCONT)
        assert st["strong_rate"] > 0 and st["strong_eta_seconds"] is not None, st
        assert st["indexer_role"] == "watch" and st["watched"] is True
        assert re.search(
            rf"multilingual +\d+ of {notes} chunks from \S+ \([\d.]+ chunks/s, .+ left\)", text
        ), text
        assert f"a running vault-brain watch or serve (pid {pid}) keeps it in step" in text
        done = watch.wait_for("strong_backlog_done")
        assert (done["done"], done["total"]) == (notes, notes)
        assert done["written"] > 0 and done["chunks_per_s"] > 0
        after = json.loads(run("status", "--vault", str(vault), "--json").stdout)
        assert after["strong_pending"] == 0 and after["strong_rate"] is None
    finally:
        code = watch.close()
    assert code == 0
