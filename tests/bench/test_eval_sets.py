"""bench/eval's sets parse, their judged notes exist in their vaults, and the split is sound.

The sets over the corpora need ../shared (or VAULT_BRAIN_SHARED); those checks skip with a
reason when it is absent. The small vaults live in bench/eval and are always checked."""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

# bench/ is not part of the package; load it by path under a name of its own.
_PATH = Path(__file__).resolve().parents[2] / "bench" / "eval_sets.py"
_SPEC = importlib.util.spec_from_file_location("vault_brain_bench_eval_sets", _PATH)
es = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = es
_SPEC.loader.exec_module(es)

EVAL_SETS = [n for n in es.SETS if es.set_path(n).parent == es.EVAL_DIR]
SHARED_SETS = [n for n in es.SETS if n not in EVAL_SETS]
ANSWERABLE_EVAL = [n for n in EVAL_SETS if n in es.ANSWERABLE]
# What bench/eval/README.md promises, per set.
SIZES = {
    "small-en": 60,
    "small-ru": 30,
    "obsidian-en": 20,
    "obsidian-ru": 20,
    "obsidian-zh": 20,
    "obsidian-ko": 20,
    "mixed": 40,
    **{name: 30 for name in es.OFFTOPIC},
}


def needs(name: str) -> None:
    """Skip unless the set's file and its vault's sources are on this machine."""
    if not es.set_path(name).is_file():
        pytest.skip(f"{es.set_path(name)} is absent (../shared not laid out here)")
    missing = [p for p in es.load(name).vault.parts if not p.available()]
    if missing:
        pytest.skip(f"{name}: vault sources absent: {[p.root for p in missing]}")


@pytest.mark.parametrize("name", EVAL_SETS)
def test_every_set_in_bench_eval_parses_with_its_promised_size(name):
    s = es.load(name)
    assert len(s.queries) == SIZES[name]
    if s.kind == "offtopic":
        assert Counter(s.labels.values()) == {"off-topic": 20, "near-miss": 10}
    else:
        assert set(s.qrels) == {qid for qid, _ in s.queries}
        assert all(3.0 in gains.values() for gains in s.qrels.values())


@pytest.mark.parametrize("name", ["small-en", "small-ru"])
def test_small_sets_have_one_answer_each_and_at_least_half_colloquial(name):
    s = es.load(name)
    counts = Counter(s.labels.values())
    assert set(counts) == {"colloquial", "ordinary"}
    assert counts["colloquial"] * 2 >= len(s.queries)
    assert all(list(g.values()) == [3.0] for g in s.qrels.values())


def test_small_notes_are_80_to_400_words_and_some_carry_frontmatter_and_links():
    for folder, count in (("small-en", 8), ("small-ru", 6)):
        notes = sorted((es.EVAL_DIR / folder).glob("*.md"))
        assert len(notes) == count
        texts = [n.read_text(encoding="utf-8") for n in notes]
        for note, text in zip(notes, texts, strict=True):
            assert 80 <= len(text.split()) <= 400, note.name
        assert sum(t.startswith("---\n") for t in texts) >= 3
        assert sum("summary:" in t for t in texts) >= 2
        assert sum("[[" in t for t in texts) >= 2


def test_mixed_questions_are_in_languages_the_vault_does_not_hold():
    s = es.load("mixed")
    assert set(s.labels.values()) <= {"ko", "ja", "es", "de", "fr"}
    assert len(s.labels) == len(s.queries)
    prefixes = {p.prefix for p in s.vault.parts}
    assert prefixes == {"en", "ru", "zh"}
    for gains in s.qrels.values():
        # Every judged note is judged, with the same grade, in each language of the vault.
        for grade in set(gains.values()):
            langs = Counter(p.split("/", 1)[0] for p, g in gains.items() if g == grade)
            assert set(langs) == {"en", "ru", "zh"} and len(set(langs.values())) == 1, gains


def test_offtopic_questions_reuse_none_of_the_tuned_ones():
    sys.path.insert(0, str(es.REPO))
    from bench.offtopic import NONSENSE, OFF_TOPIC

    tuned = {q.casefold() for q in NONSENSE} | {
        q.casefold() for qs in OFF_TOPIC.values() for q in qs
    }
    ours = [q for n in es.OFFTOPIC for q in es.load(n).texts()]
    assert not {q.casefold() for q in ours} & tuned
    assert len({q.casefold() for q in ours}) == len(ours)


@pytest.mark.parametrize("name", ANSWERABLE_EVAL + SHARED_SETS)
def test_every_judged_note_exists_in_its_vault(name):
    needs(name)
    s = es.load(name)
    on_disk = s.vault.note_paths()
    judged = {p for gains in s.qrels.values() for p in gains}
    assert judged, name
    assert judged <= on_disk, sorted(judged - on_disk)[:5]


def test_the_mixed_vault_builds_with_every_judged_note(tmp_path):
    needs("mixed")
    bs = es.bench_set("mixed", part="dev")
    vault = bs.build(tmp_path)  # raises when a judged note is missing
    top = sorted(p.name for p in vault.iterdir())
    assert top == ["en", "ru", "zh"]
    assert len(list(vault.rglob("*.md"))) == 3 * 173


def test_a_small_vault_builds_from_bench_eval(tmp_path):
    bs = es.bench_set("small-en", part="held_out")
    vault = bs.build(tmp_path)
    assert sorted(p.name for p in vault.glob("*.md")) == sorted(
        p.name for p in (es.EVAL_DIR / "small-en").glob("*.md")
    )
    assert len(bs.queries) == 24
    assert all(
        set(bs.qrels[qid]) <= {bs.hit_id(p.name) for p in vault.glob("*.md")}
        for qid, _ in bs.queries
    )


def test_split_covers_every_set_once_without_overlap():
    split = es.read_split()
    assert set(split) == set(es.SETS)
    for name in es.SETS:
        dev, held = split[name]["dev"], split[name]["held_out"]
        assert not set(dev) & set(held), name
        assert len(set(dev)) == len(dev) and len(set(held)) == len(held), name
        assert 0.3 <= len(held) / (len(dev) + len(held)) <= 0.5, name
        if es.set_path(name).is_file():
            assert sorted(dev + held) == sorted(es.load(name).texts()), name


@pytest.mark.parametrize("name", EVAL_SETS)
def test_split_holds_out_part_of_every_label(name):
    s = es.load(name)
    parts = es.split(name)
    for label in set(s.labels.values()):
        ids = {q for q, lab in s.labels.items() if lab == label}
        assert ids & set(parts["held_out"]) and ids & set(parts["dev"]), (name, label)


def test_split_follows_the_rule_so_it_was_not_picked_by_hand():
    for name in EVAL_SETS:
        s = es.load(name)
        stored = es.read_split()[name]
        # A fixed point of the rule, and each label's held-out share is round(0.4 n).
        assert es.assign(s, set(stored["held_out"]), set(stored["dev"])) == stored, name
        held = set(stored["held_out"])
        for label in set(s.labels.values()) or {""}:
            texts = [t for q, t in s.queries if s.labels.get(q, "") == label]
            assert sum(t in held for t in texts) == round(es.HELD_OUT_SHARE * len(texts))


def test_offtopic_queries_and_parts_partition_the_set():
    whole = es.offtopic_queries("offtopic-obsidian-ko")
    dev = es.offtopic_queries("offtopic-obsidian-ko", part="dev")
    held = es.offtopic_queries("offtopic-obsidian-ko", part="held_out")
    assert sorted(dev + held) == sorted(whole)
    assert {k for k, _ in whole} == {"off-topic", "near-miss"}
    assert es.offtopic_sets_for("obsidian-ko") == ["offtopic-obsidian-ko"]
    assert es.offtopic_sets_for("small-en") == ["offtopic-small-en"]


def test_a_malformed_line_is_a_clear_error(tmp_path, monkeypatch):
    bad = tmp_path / "bad.tsv"
    bad.write_text(
        "# query\tnotes, vault = bench/eval/small-en\nwhere is it?\tHome network.md:3\n",
        encoding="utf-8",
    )
    monkeypatch.setitem(es.ANSWERABLE, "bad", ("eval", str(bad)))
    with pytest.raises(es.EvalDataError, match=re.escape("bad.tsv:2")):
        es.load("bad")
