"""Evaluation sets (bench/eval/ and the shared question sets) with a fixed dev/held-out split.

Issue 21: the relevance cut-off is to be redesigned on material nobody tuned on. Every set here
is one of two kinds (bench/eval/README.md says how each was written and checked):

- answerable: questions with graded judgments (path:grade, as ../shared/corpora/questions), over
  a vault built from bench/eval/ (small everyday vaults) or from the corpus archives (Obsidian
  Help in one language, or a mixed en+ru+zh vault);
- off-topic: questions the vault cannot answer, each `off-topic` (plainly another subject) or
  `near-miss` (another app's feature, another language's API, a neighbouring topic).

bench/eval/split.json fixes, per set, which questions are held out; the rest is dev. Choose
defaults on dev only and report held-out separately.

    from bench.eval_sets import load, bench_set, offtopic_queries, split
    bs = bench_set("small-en", part="dev")          # a bench.quality.BenchSet
    pairs = offtopic_queries("offtopic-obsidian-ru", part="held_out")   # [(kind, query)]

    python -m bench.eval_sets                # counts per set and split part
    python -m bench.eval_sets --write-split  # assign new questions, rewrite split.json/SPLIT.md
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import shutil
import sys
import tarfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

if __package__ in (None, ""):  # run as a script or loaded by path: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import REPO, nfc, shared_dir, unpack  # noqa: E402

EVAL_DIR = REPO / "bench" / "eval"
SPLIT_FILE = EVAL_DIR / "split.json"
SPLIT_DOC = EVAL_DIR / "SPLIT.md"
HELD_OUT_SHARE = 0.4
PARTS = ("dev", "held_out")
KINDS = ("off-topic", "near-miss")

_OBSIDIAN_LANGS = ("en", "ru", "zh", "ko", "de", "fr", "es", "ja")

# set name -> (folder: "eval" | "shared", file name)
ANSWERABLE = {
    "small-en": ("eval", "small-en-questions.tsv"),
    "small-ru": ("eval", "small-ru-questions.tsv"),
    "obsidian-en": ("eval", "obsidian-help-questions-en.tsv"),
    "obsidian-ru": ("eval", "obsidian-help-questions-ru.tsv"),
    "obsidian-zh": ("eval", "obsidian-help-questions-zh.tsv"),
    "obsidian-ko": ("eval", "obsidian-help-questions-ko.tsv"),
    "mixed": ("eval", "mixed-questions.tsv"),
    # The shared sets (../shared/corpora/questions): the defaults were chosen on these.
    "cpp-docs": ("shared", "cpp-docs-questions.tsv"),
    "obsidian-de": ("shared", "obsidian-help-questions-de.tsv"),
    "obsidian-fr": ("shared", "obsidian-help-questions-fr.tsv"),
    "obsidian-es": ("shared", "obsidian-help-questions-es.tsv"),
    "obsidian-ja": ("shared", "obsidian-help-questions-ja.tsv"),
}
OFFTOPIC = {
    **{
        f"offtopic-obsidian-{lang}": f"offtopic-obsidian-help-{lang}.tsv"
        for lang in _OBSIDIAN_LANGS
    },
    **{
        f"offtopic-cpp-docs-{lang}": f"offtopic-cpp-docs-{lang}.tsv"
        for lang in ("en", "ru", "zh", "de")
    },
    "offtopic-small-en": "offtopic-small-en.tsv",
    "offtopic-small-ru": "offtopic-small-ru.tsv",
}
SETS = (*ANSWERABLE, *OFFTOPIC)


class EvalDataError(ValueError):
    """A set file that does not follow the format (bench/eval/README.md)."""


# --- vaults ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One folder of a vault: `root` from `source`, placed at `prefix` ("" = the vault root).

    source "eval": root is a folder of bench/eval; source "corpora": root is a folder inside a
    corpus archive of ../shared/corpora (the archive is named after root's first component)."""

    prefix: str
    source: str
    root: str

    def archive(self) -> Path:
        return shared_dir() / "corpora" / (self.root.split("/", 1)[0] + ".tar.gz")

    def available(self) -> bool:
        return (
            (EVAL_DIR / self.root).is_dir() if self.source == "eval" else self.archive().is_file()
        )

    def note_paths(self) -> set[str]:
        """The `.md` paths this part adds to the vault (NFC, vault-relative), without unpacking."""
        pre = self.prefix + "/" if self.prefix else ""
        if self.source == "eval":
            folder = EVAL_DIR / self.root
            return {nfc(pre + p.relative_to(folder).as_posix()) for p in folder.rglob("*.md")}
        root = self.root.rstrip("/") + "/"
        return {
            nfc(pre + name[len(root) :])
            for name in _archive_notes(self.archive())
            if name.startswith(root)
        }


@functools.cache
def _archive_notes(archive: Path) -> tuple[str, ...]:
    """The `.md` members of a corpus archive (read once per process: the archives are large)."""
    with tarfile.open(archive) as tar:
        return tuple(m.name for m in tar.getmembers() if m.isfile() and m.name.endswith(".md"))


@dataclass(frozen=True)
class VaultSpec:
    """How to build a set's vault: its parts, each under its prefix."""

    parts: tuple[Part, ...]

    @property
    def label(self) -> str:
        return "; ".join(f"{p.prefix or '.'}/ <- {p.source}:{p.root}" for p in self.parts)

    def available(self) -> bool:
        return all(p.available() for p in self.parts)

    def note_paths(self) -> set[str]:
        return set().union(*(p.note_paths() for p in self.parts))

    def build(self, folder: Path) -> Path:
        """Write the vault into `folder/vault` (a fresh folder) and return it."""
        vault = folder / "vault"
        vault.mkdir(parents=True)
        for i, part in enumerate(self.parts):
            target = vault / part.prefix if part.prefix else vault
            if part.source == "eval":
                shutil.copytree(EVAL_DIR / part.root, target, dirs_exist_ok=True)
                continue
            unpacked = unpack(part.archive(), part.root, folder / f"unpacked-{i}")
            target.mkdir(parents=True, exist_ok=True)
            for child in unpacked.iterdir():
                shutil.move(str(child), target / child.name)
            shutil.rmtree(folder / f"unpacked-{i}")
        return vault


def _vault_spec(header: str, build: str) -> VaultSpec:
    """From a file's `vault = ...` (and, for a mixed vault, its `# build:` line)."""
    if header == "mixed":
        parts = []
        for item in build.split("(", 1)[0].split(";"):
            prefix, sep, root = item.partition("<-")
            if not sep:
                raise EvalDataError(f"build line: {item!r} is not 'prefix/ <- root'")
            parts.append(Part(prefix.strip().strip("/"), "corpora", root.strip()))
        if not parts:
            raise EvalDataError("a mixed vault needs a '# build:' line")
        return VaultSpec(tuple(parts))
    if header.startswith("bench/eval/"):
        return VaultSpec((Part("", "eval", header.removeprefix("bench/eval/")),))
    return VaultSpec((Part("", "corpora", header),))


# --- sets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalSet:
    name: str
    kind: str  # "answerable" | "offtopic"
    path: Path  # the set's file
    vault: VaultSpec
    language: str  # the vault's language; "mixed" for the mixed vault
    queries: list[tuple[str, str]]  # (question id "q1"..., text), file order
    qrels: dict[str, dict[str, float]] = field(default_factory=dict)  # id -> {NFC path: gain}
    labels: dict[str, str] = field(default_factory=dict)  # id -> kind / question language

    def texts(self) -> list[str]:
        return [text for _, text in self.queries]


def set_path(name: str) -> Path:
    if name in ANSWERABLE:
        where, file = ANSWERABLE[name]
        folder = EVAL_DIR if where == "eval" else shared_dir() / "corpora" / "questions"
        return folder / file
    if name in OFFTOPIC:
        return EVAL_DIR / OFFTOPIC[name]
    raise KeyError(f"unknown set {name!r} (known: {', '.join(SETS)})")


def _language(name: str) -> str:
    if name == "mixed":
        return "mixed"
    if name == "cpp-docs" or name.startswith("offtopic-cpp-docs"):
        return "en"  # the vault's language; the questions may be in another
    return name.rsplit("-", 1)[-1]


def load(name: str) -> EvalSet:
    """Parse a set's file. Comment lines: the header (`... vault = <root>`), `# build: ...`
    (mixed vault), and `# kind: <label>` / `# lang: <code>` that label the questions after them."""
    path = set_path(name)
    kind = "answerable" if name in ANSWERABLE else "offtopic"
    header = build = label = ""
    queries: list[tuple[str, str]] = []
    qrels: dict[str, dict[str, float]] = {}
    labels: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if line.startswith("#"):
                body = line[1:].strip()
                if "vault =" in body and not header:
                    header = body.rsplit("vault =", 1)[1].strip()
                elif body.startswith("build:"):
                    build = body.removeprefix("build:").strip()
                elif body.startswith(("kind:", "lang:")):
                    label = body.split(":", 1)[1].strip()
                continue
            if not line.strip():
                continue
            cells = line.split("\t")
            if len(cells) != 2 or not all(c.strip() for c in cells):
                raise EvalDataError(f"{path.name}:{n}: want two non-empty TAB-separated cells")
            qid = f"q{len(queries) + 1}"
            if kind == "offtopic":
                item_kind, text = cells[0].strip(), cells[1].strip()
                if item_kind not in KINDS:
                    raise EvalDataError(f"{path.name}:{n}: kind {item_kind!r} not in {KINDS}")
                labels[qid] = item_kind
            else:
                text, judged = cells[0].strip(), cells[1]
                gains: dict[str, float] = {}
                for item in judged.split(";"):
                    note, _, grade = item.strip().rpartition(":")
                    if not note or grade not in ("1", "2"):
                        raise EvalDataError(f"{path.name}:{n}: judgment {item!r} is not path:1|2")
                    gains[nfc(note)] = 2.0 ** int(grade) - 1
                if 3.0 not in gains.values():
                    raise EvalDataError(f"{path.name}:{n}: no grade-2 answer")
                qrels[qid] = gains
                if label:
                    labels[qid] = label
            queries.append((qid, text))
    if not header:
        raise EvalDataError(f"{path.name}: no 'vault = ...' in its comment line")
    texts = [t for _, t in queries]
    if len(set(texts)) != len(texts):
        raise EvalDataError(f"{path.name}: a question appears twice")
    return EvalSet(
        name, kind, path, _vault_spec(header, build), _language(name), queries, qrels, labels
    )


def available(name: str) -> bool:
    """Whether the set's file and every source of its vault are on this machine."""
    return set_path(name).is_file() and load(name).vault.available()


# --- split ----------------------------------------------------------------------------------


def _rank_key(name: str, text: str) -> str:
    return hashlib.sha256(f"vault-brain-eval-split\n{name}\n{text}".encode()).hexdigest()


def assign(es: EvalSet, held_out: set[str] | None = None, dev: set[str] | None = None) -> dict:
    """Held-out questions for a set: those already assigned keep their part; the others are
    ranked by a hash of (set, text) within each label and the first ones are held out until
    each label's held-out share is closest to HELD_OUT_SHARE. Deterministic."""
    held_out, dev = set(held_out or ()), set(dev or ())
    by_label: dict[str, list[str]] = {}
    for qid, text in es.queries:
        by_label.setdefault(es.labels.get(qid, ""), []).append(text)
    out_held = []
    for texts in by_label.values():
        fixed_held = [t for t in texts if t in held_out]
        new = sorted(
            (t for t in texts if t not in held_out and t not in dev),
            key=lambda t: _rank_key(es.name, t),
        )
        want = round(HELD_OUT_SHARE * len(texts)) - len(fixed_held)
        out_held += fixed_held + new[: max(0, want)]
    order = {t: i for i, t in enumerate(es.texts())}
    held = sorted(out_held, key=order.__getitem__)
    return {"held_out": held, "dev": [t for t in es.texts() if t not in set(held)]}


def read_split() -> dict[str, dict[str, list[str]]]:
    return json.loads(SPLIT_FILE.read_text(encoding="utf-8"))["sets"]


def split(name: str) -> dict[str, list[str]]:
    """{"dev": [question id...], "held_out": [...]} for a set, from split.json."""
    es = load(name)
    entry = read_split()[name]
    ids = {text: qid for qid, text in es.queries}
    missing = [t for part in PARTS for t in entry[part] if t not in ids]
    if missing:
        raise EvalDataError(f"split.json: {name} lists questions not in the set: {missing[:3]}")
    return {part: [ids[t] for t in entry[part]] for part in PARTS}


def subset(es: EvalSet, part: str | None) -> EvalSet:
    """The set restricted to one split part (None: the whole set)."""
    if part is None:
        return es
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, not {part!r}")
    keep = set(split(es.name)[part])
    return replace(
        es,
        queries=[(q, t) for q, t in es.queries if q in keep],
        qrels={q: g for q, g in es.qrels.items() if q in keep},
        labels={q: lab for q, lab in es.labels.items() if q in keep},
    )


# --- what the benchmarks take ---------------------------------------------------------------


def bench_set(name: str, part: str | None = None):
    """An answerable set as bench.quality's BenchSet (its vault checked against the judgments
    when built)."""
    from bench.quality import BenchSet

    es = subset(load(name), part)
    if es.kind != "answerable":
        raise ValueError(f"{name} is an off-topic set; use offtopic_queries()")

    def build(folder: Path) -> Path:
        vault = es.vault.build(folder)
        on_disk = {nfc(p.relative_to(vault).as_posix()) for p in vault.rglob("*.md")}
        missing = {p for judged in es.qrels.values() for p in judged} - on_disk
        if missing:
            raise SystemExit(f"{name}: judged notes not in the vault: {sorted(missing)[:5]}")
        return vault

    label = name if part is None else f"{name}:{part}"
    return BenchSet(label, "questions", es.queries, es.qrels, True, build, nfc, es.language)


def offtopic_queries(name: str, part: str | None = None) -> list[tuple[str, str]]:
    """(kind, query) pairs of an off-topic set, kind = off-topic | near-miss."""
    es = subset(load(name), part)
    if es.kind != "offtopic":
        raise ValueError(f"{name} is not an off-topic set")
    return [(es.labels[qid], text) for qid, text in es.queries]


def offtopic_sets_for(name: str) -> list[str]:
    """The off-topic sets asked of the same vault as the answerable set `name`."""
    vault = load(name).vault
    return [o for o in OFFTOPIC if load(o).vault == vault]


# --- split files ----------------------------------------------------------------------------


def write_split() -> dict[str, dict[str, list[str]]]:
    """Keep every assignment already in split.json, assign new questions, drop removed ones,
    and rewrite split.json and SPLIT.md. Sets whose file is absent keep their entry."""
    old = read_split() if SPLIT_FILE.is_file() else {}
    sets: dict[str, dict[str, list[str]]] = {}
    for name in SETS:
        if not set_path(name).is_file():
            if name in old:
                sets[name] = old[name]
            continue
        es = load(name)
        prev = old.get(name, {})
        sets[name] = assign(es, set(prev.get("held_out", ())), set(prev.get("dev", ())))
    payload = {
        "about": "Per set: the held-out questions (check only) and the dev questions (tune on "
        "these). Written by `python -m bench.eval_sets --write-split`; see SPLIT.md.",
        "sets": sets,
    }
    SPLIT_FILE.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", "utf-8")
    SPLIT_DOC.write_text(split_markdown(sets), encoding="utf-8")
    return sets


def split_markdown(sets: dict[str, dict[str, list[str]]]) -> str:
    lines = [
        "# Dev / held-out split",
        "",
        "Every evaluation set is split once, about 60 % dev and 40 % held-out. Tune defaults",
        "(cut-off, confidence levels, fusion) on **dev** only; report **held-out** separately",
        "and never change a default because of a held-out result.",
        "",
        "Rule: within each set, questions are grouped by their label (colloquial / ordinary,",
        "off-topic / near-miss, question language for `mixed`), ranked by",
        "sha256(`vault-brain-eval-split\\n<set>\\n<question>`), and the first round(0.4 × n) of",
        "each group are held out. `python -m bench.eval_sets --write-split` keeps every",
        "assignment already made and only assigns new questions. `split.json` holds the",
        "question texts per part; `bench/eval_sets.py` reads it (`split(name)`, `part=`).",
        "",
        "The shared sets (`cpp-docs`, `obsidian-de/fr/es/ja`) were already used to choose the",
        "current defaults, so their held-out part is not unseen; the sets of bench/eval are.",
        "",
        "| set | questions | dev | held-out |",
        "|---|---|---|---|",
    ]
    for name, parts in sets.items():
        d, h = len(parts["dev"]), len(parts["held_out"])
        lines.append(f"| {name} | {d + h} | {d} | {h} |")
    lines += ["", "## Held-out questions", ""]
    for name, parts in sets.items():
        lines.append(f"### {name}")
        lines.append("")
        lines += [f"- {t}" for t in parts["held_out"]]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write-split", action="store_true", help="assign new questions")
    args = parser.parse_args(argv)
    if args.write_split:
        write_split()
    for name in SETS:
        if not set_path(name).is_file():
            print(f"{name}: absent ({set_path(name)})")
            continue
        es = load(name)
        parts = split(name)
        labels = ", ".join(f"{k} {v}" for k, v in Counter(es.labels.values()).items())
        print(
            f"{name}: {len(es.queries)} questions ({labels or 'unlabelled'}), "
            f"dev {len(parts['dev'])}, held-out {len(parts['held_out'])}; vault {es.vault.label}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
