"""`vault-brain search` parsed without typer (vault_brain/cli_search.py) must be the typer
command's twin: the same options, the same values for every argv it takes, and typer's
answer (help, usage errors) for every argv it does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer

from vault_brain.cli import app
from vault_brain.cli_search import OPTIONS, parse


def _search_command():
    group = typer.main.get_command(app)
    return group.commands["search"]  # type: ignore[attr-defined]


def _typer_params(argv: list[str]) -> dict | None:
    """What typer's own parser makes of the words after `search`, or None for a usage error."""
    command = _search_command()
    try:
        with command.make_context("search", list(argv)) as ctx:
            params = dict(ctx.params)
    except typer._click.exceptions.ClickException:  # a usage error or a bad value
        return None
    except typer._click.exceptions.Exit:  # --help
        return None
    # A repeatable option reaches the function as typer's list convertor makes it: None when
    # not given (its default), else a list.
    params["tag"] = list(params["tag"]) or None
    return params


def test_the_options_are_the_typer_commands():
    declared: dict[str, tuple[str, str]] = {}
    for param in _search_command().params:
        if param.param_type_name != "option":
            continue
        kind = "flag" if param.is_flag else "list" if param.multiple else "value"
        for name in (*param.opts, *param.secondary_opts):
            declared[name] = (param.name, kind)
    declared.pop("--help", None)  # help is typer's (parse() hands it over)
    declared.pop("-h", None)
    ours = {
        name: (dest, "flag" if kind is bool else "list" if kind is list else "value")
        for name, (dest, kind) in OPTIONS.items()
    }
    assert ours == declared


PLAIN = [
    ["lambda capture"],
    ["lambda capture", "--mode", "fts", "--json", "--vault", "/v"],
    ["--vault", "/v", "q"],
    ["q", "-v", "/v", "-c", "/c.toml", "-n", "7"],
    ["q", "--limit=3", "--min-score=0.25", "--max-tokens", "500"],
    ["q", "--tag", "a", "--tag", "b", "--folder", "Notes", "--since", "7d", "--until", "24h"],
    ["q", "--explain", "--min-score", "0", "--limit", "100"],
    ["q", "--min-score", "1", "--limit", "1", "--mode", "vector"],
    ["q", "--mode", "nonsense"],  # run() refuses it, in both paths, with the same message
    ["q", "--limit", "5_0"],  # Python's int(), as typer's
    [""],
    ["-"],
    ["日本語の質問", "--folder", "ノート"],
]

TYPERS = [
    [],
    ["--help"],
    ["q", "-h"],
    ["q", "extra"],
    ["q", "--limit", "0"],
    ["q", "--limit", "101"],
    ["q", "-n", "x"],
    ["q", "--min-score", "1.5"],
    ["q", "--min-score", "-0.1"],
    ["q", "--min-score", "nan"],
    ["q", "--max-tokens", "0"],
    ["q", "--mode"],
    ["q", "--no-such-option"],
    ["q", "--json=yes"],
    ["q", "--", "-x"],
    ["-x"],
    ["q", "-n5"],
    ["q", "--folder", "--json"],
    ["q", "--limit", "3", "--limit", "4"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=lambda a: " ".join(a) or "<none>")
def test_plain_arguments_parse_as_typer_parses_them(argv):
    ours = parse(argv)
    assert ours is not None
    assert ours == _typer_params(argv)


@pytest.mark.parametrize("argv", TYPERS, ids=lambda a: " ".join(a) or "<none>")
def test_what_is_not_plain_goes_to_typer(argv):
    """parse() says None: typer parses these and answers (help or its usage error), or
    takes them in a way parse() leaves to it (the last of a repeated option)."""
    assert parse(argv) is None


def _run(*args: str, stdout=subprocess.PIPE, env=None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("VAULT_BRAIN_")}
    full.update({"VAULT_BRAIN_EMBED_PROVIDER": "none", **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "vault_brain", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=full,
        timeout=120,
    )


@pytest.fixture
def two_notes(vault):
    vault.write("Deploy.md", "# Deploy to production\n\nRun the pipeline, promote the canary.\n")
    vault.write("Tea.md", "# Green tea\n\nSteep at 80 degrees.\n")
    return str(vault.root)


def test_both_paths_print_the_same_search(two_notes):
    """The same search through the plain path and through typer (a repeated --limit sends it
    there): the same JSON, the same lines, the same usage error for a bad mode."""
    base = ["search", "deploy the canary", "--vault", two_notes, "--mode", "fts"]
    for extra in (["--json"], []):
        plain = _run(*base, "--limit", "5", *extra)
        typed = _run(*base, "--limit", "9", "--limit", "5", *extra)
        assert plain.returncode == typed.returncode == 0, plain.stderr + typed.stderr
        assert plain.stdout == typed.stdout
        assert "Deploy.md" in plain.stdout
        if extra:
            assert json.loads(plain.stdout)["results"][0]["path"] == "Deploy.md"
    bad_plain = _run("search", "x", "--vault", two_notes, "--mode", "nope")
    bad_typed = _run("search", "x", "--vault", two_notes, "--mode", "nope", "-n", "1", "-n", "1")
    assert bad_plain.returncode == bad_typed.returncode == 2
    assert bad_plain.stderr == bad_typed.stderr
    assert "--mode must be one of hybrid, fts, vector" in bad_plain.stderr


def test_a_search_whose_reader_is_gone_exits_quietly(two_notes):
    """`vault-brain search … | head -1` after head exited: the write fails (EPIPE), and that
    is a quiet exit 0. The pipe's read end is closed before the search starts, so every
    run takes that path."""
    read, write = os.pipe()
    os.close(read)
    try:
        r = _run("search", "deploy", "--vault", two_notes, "--mode", "fts", stdout=write)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")


def test_a_bad_vault_is_a_usage_error_without_typer(tmp_path):
    r = _run("search", "x", "--vault", str(tmp_path / "missing"))
    assert r.returncode == 2
    assert r.stderr.startswith("vault-brain: ") and "missing" in r.stderr


def test_any_mix_of_words_parses_as_typer_or_goes_to_it():
    """3,000 argv drawn (seeded) from option names, values good and bad, and queries: parse()
    either agrees with typer's parser or hands the words to it; never takes what typer
    refuses."""
    import random

    words = [*OPTIONS, "--help", "-h", "--", "--nope", "-n5", "--limit=2", "--json=1"]
    words += ["q", "two words", "", "-", "0", "1", "7", "100", "101", "0.5", "x", "nan", "7d"]
    rng = random.Random(23)
    took = 0
    for _ in range(3000):
        argv = [rng.choice(words) for _ in range(rng.randint(0, 6))]
        ours = parse(argv)
        if ours is not None:
            took += 1
            assert ours == _typer_params(argv), argv
    assert took > 100  # the draw reaches the plain path, not only typer's
