"""Language-aware text analysis for the full-text arm: pure functions, no SQL.

An index's full-text engine only splits text into words; it knows no language. This module
turns text into the terms the index stores and matches, the same way at index and at query
time (every backend is fed and asked the same terms):

- NFKC and lower case; words are runs of letters, marks and digits (so Devanagari vowel
  signs and Thai tone marks stay inside their word, which FTS5's default does not do).
- Chinese, Japanese and Korean runs become overlapping character bigrams; Thai, Lao,
  Khmer and Myanmar runs (no spaces between words) become trigrams of grapheme clusters
  (measured against other n-grams and a Thai word segmenter in docs/benchmarks.md).
- Other words: the note's language's stopwords are dropped and the rest is stemmed with
  its Snowball stemmer (PyStemmer), so "Notizen" and "Notiz", "заметки" and "заметка"
  meet. Languages without a stemmer keep their words as they are.

A note's language comes from its frontmatter (`lang:` / `language:`), else from a cheap
detector (the script of its letters, then stopword profiles for scripts that many
languages share), else from the configured languages. The query side never knows which
note it is after: it analyses the query for every language of the vault, each word as the
group of its forms (`("notiz", "notizen")`); a backend ORs the forms of a group and the
groups (SQLite quotes every form, so no FTS5 syntax ever comes from user text).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, NamedTuple

import Stemmer

from vault_brain.native import load
from vault_brain.text.stopwords import STOPWORDS

# Bump on any change to what analyze() produces: the index stores it and rebuilds on a
# mismatch (see identity()).
ANALYZER_VERSION = 1
MAX_QUERY_TERMS = 32
# Character n-grams (CJK, Thai) are many per word: a question gets more of them.
MAX_QUERY_GRAMS = 96
# The language detection's sample without code in C (vault_brain/native/_mdscan.c).
_native = load("_mdscan")
# analyze()'s words and forms, the detection's word counts in C (native/textnative.c).
_textnative = load("textnative")
DETECT_CHARS = 2500  # the start of a note is enough to tell its language
MIN_EVIDENCE = 0.03  # stopword hits per word below which a text shows no language

# ISO 639-1 code -> Snowball algorithm in PyStemmer (None: no stemmer, words kept as is).
LANGUAGES: dict[str, str | None] = {
    "ar": "arabic",
    "bn": None,
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    # Porter's original algorithm (what FTS5's porter tokenizer runs): it measured a little
    # better here than Snowball's newer "english" (docs/benchmarks.md), e.g. on "DLLs".
    "en": "porter",
    "eo": "esperanto",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "he": None,
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "ja": None,
    "ka": None,
    "km": None,
    "ko": None,
    "lo": None,
    "lt": "lithuanian",
    "my": None,
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sk": None,
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "th": None,
    "tr": "turkish",
    "uk": None,
    "vi": None,
    "yi": "yiddish",
    "zh": None,
}

_ALIASES = {
    "nb": "no",
    "nn": "no",
    "iw": "he",
    "in": "id",
    "english": "en",
    "german": "de",
    "deutsch": "de",
    "french": "fr",
    "français": "fr",
    "francais": "fr",
    "spanish": "es",
    "español": "es",
    "espanol": "es",
    "italian": "it",
    "italiano": "it",
    "portuguese": "pt",
    "português": "pt",
    "dutch": "nl",
    "nederlands": "nl",
    "russian": "ru",
    "русский": "ru",
    "swedish": "sv",
    "svenska": "sv",
    "danish": "da",
    "dansk": "da",
    "norwegian": "no",
    "norsk": "no",
    "finnish": "fi",
    "suomi": "fi",
    "chinese": "zh",
    "japanese": "ja",
    "korean": "ko",
    "polish": "pl",
    "polski": "pl",
    "czech": "cs",
    "turkish": "tr",
    "ukrainian": "uk",
    "arabic": "ar",
    "greek": "el",
    "hebrew": "he",
    "hindi": "hi",
    "thai": "th",
    "vietnamese": "vi",
}

# Scripts that one language of ours owns; the others (Latin, Cyrillic, Arabic,
# Devanagari) are told apart by stopword profiles.
_SCRIPT_LANGUAGE = {
    "GREEK": "el",
    "HEBREW": "he",
    "BENGALI": "bn",
    "TAMIL": "ta",
    "ARMENIAN": "hy",
    "GEORGIAN": "ka",
    "THAI": "th",
    "KHMER": "km",
    "LAO": "lo",
    "MYANMAR": "my",
    "HANGUL": "ko",
    "KANA": "ja",
    "HAN": "zh",
}
_SCRIPT_DEFAULT = {"LATIN": "en", "CYRILLIC": "ru", "ARABIC": "ar", "DEVANAGARI": "hi"}
_SCRIPT_OF_LANGUAGE = {
    **{lang: script for script, lang in _SCRIPT_LANGUAGE.items()},
    "ru": "CYRILLIC",
    "uk": "CYRILLIC",
    "ar": "ARABIC",
    "fa": "ARABIC",
    "hi": "DEVANAGARI",
    "ne": "DEVANAGARI",
}


def script_of_language(lang: str) -> str:
    return _SCRIPT_OF_LANGUAGE.get(lang, "LATIN")


# Han (with extensions and compatibility ideographs), the ideographic iteration marks,
# hiragana, katakana (with phonetic extensions and half-width forms), hangul jamo and
# syllables: runs of these become bigrams.
_CJK = (
    "\u1100-\u11ff\u3005-\u3007\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
# Thai, Lao, Myanmar (with extensions), Khmer (with symbols): written without spaces.
_SEA = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\ua9e0-\ua9ff\uaa60-\uaa7f"


class _Unicode(NamedTuple):
    token: Any  # a CJK run, a Thai-like run or a word
    word: Any  # a run of letters, marks and digits
    cluster: Any  # a grapheme cluster


@cache
def _unicode() -> _Unicode:
    """The patterns that need the `regex` package (Unicode properties, set difference,
    grapheme clusters): compiled at the first text that needs them, so plain text (most
    queries) never imports it (~9 ms of a one-shot CLI search)."""
    import regex

    token = regex.compile(
        rf"(?P<cjk>[{_CJK}]+)|(?P<sea>[{_SEA}]+)|(?P<word>[[\p{{L}}\p{{M}}\p{{N}}]--[{_CJK}{_SEA}]]+)",
        regex.V1,
    )
    return _Unicode(token, regex.compile(r"[\p{L}\p{M}\p{N}]+"), regex.compile(r"\X"))


# CJK or a no-space script, or a block where combining marks live: text with one of these
# is split by the `regex` module (the C of vault_brain/native/textnative.c leaves it to
# Python). A character class's body, no escapes.
_SLOW_CLASS = (
    f"{_CJK}{_SEA}\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a"
    "\u064b-\u065f\u0670\u06d6-\u06ed\u0711\u0730-\u074a\u07a6-\u07b0\u07eb-\u07f3"
    "\u0816-\u082d\u0859-\u085b\u0898-\u08ff\u0900-\u0dff\u0f00-\u0fff\u1ab0-\u1aff"
    "\u1b00-\u1bff\u1dc0-\u1dff\u20d0-\u20ff\u2cef-\u2cf1\u2de0-\u2dff\u302a-\u302f"
    "\u3099\u309a\ua66f-\ua67d\ua8e0-\ua8f1\ufe00-\ufe0f\ufe20-\ufe2f"
    "\U00010000-\U0010ffff"
)


class _Scripts(NamedTuple):
    special: re.Pattern[str]  # CJK or a no-space script: cut into grams
    slow: re.Pattern[str]  # ... or a block where combining marks live: the `regex` split


@cache
def _scripts() -> _Scripts:
    """Compiled at the first text that is not ASCII (7 ms: their ranges reach the astral
    planes), so an ASCII query does not pay for them."""
    return _Scripts(re.compile(f"[{_CJK}{_SEA}]"), re.compile(f"[{_SLOW_CLASS}]"))


# Text with none of _Scripts.slow (CJK, the no-space scripts, or the blocks where
# combining marks live) is split by the stdlib's much faster `re` into the same words.
_FAST_WORD = re.compile(r"[^\W_]+")
# ASCII text: every character but a letter or digit becomes a space, then str.split; the
# same words as _FAST_WORD, 4x faster (str.translate has a table path for ASCII).
_ASCII_SPACES = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})

# Runs of scripts written without spaces are cut into overlapping n-grams: CJK into
# character bigrams; Thai, Lao, Khmer and Myanmar into trigrams of grapheme clusters (a
# consonant with its vowel signs and tone marks), which measured best on bench/languages.py
# (th, km) against character bigrams and trigrams, cluster bigrams and PyThaiNLP's newmm
# word segmenter (docs/benchmarks.md).
CJK_NGRAM = 2
SEA_NGRAM = 3


def normalize_language(value: object) -> str | None:
    """A language code we know from what a person may write: "de", "de-DE", "pt_BR",
    "German", "Deutsch"; None when we do not know it."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if not text:
        return None
    if text in _ALIASES:
        return _ALIASES[text]
    code = re.split(r"[-_]", text, maxsplit=1)[0]
    code = _ALIASES.get(code, code)
    return code if code in LANGUAGES else None


_FRONTMATTER = re.compile(
    r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S
)
_LANG_KEY = re.compile(r"^(?:lang|language)[ \t]*:[ \t]*[\"']?([^\"'#\r\n]*)", re.M | re.I)


def frontmatter_language(text: str) -> str | None:
    """The `lang:` / `language:` of a note's YAML frontmatter (top-level key), normalised."""
    m = _FRONTMATTER.match(text[:20000])
    if not m:
        return None
    key = _LANG_KEY.search(m.group(1))
    return normalize_language(key.group(1)) if key else None


# --- stemming ------------------------------------------------------------------------


_local = threading.local()


def _stemmer(algorithm: str) -> Stemmer.Stemmer:
    """PyStemmer's stemmers are not thread-safe: one per thread (the server searches from
    several threads)."""
    stemmers = getattr(_local, "stemmers", None)
    if stemmers is None:
        stemmers = _local.stemmers = {}
    got = stemmers.get(algorithm)
    if got is None:
        got = stemmers[algorithm] = Stemmer.Stemmer(algorithm)
        # Its own cache of 10,000 words, purged when full, made a new word's stem 4x as
        # slow on cpp-docs (0.1 CPU-s); the forms are cached here already (_Language).
        got.maxCacheSize = 0
    return got


@dataclass
class _Language:
    code: str
    stopwords: frozenset[str]
    algorithm: str | None
    cache: dict[str, str]  # word -> form, shared by threads (dict updates are atomic)
    native: Any = None  # textnative.Forms: analyze() in C, forms() for its new words

    @property
    def stemmer(self) -> Stemmer.Stemmer | None:
        return _stemmer(self.algorithm) if self.algorithm else None

    def form(self, word: str) -> str:
        """The indexed form of a lowercase word: its stem, or "" for a stopword."""
        got = self.cache.get(word)
        if got is not None:
            return got
        stemmer = self.stemmer
        if word in self.stopwords:
            got = ""
        elif stemmer is None:
            got = word
        else:
            got = stemmer.stemWord(_premap(self.code, word)) or word
        if len(self.cache) > 300_000:
            self.cache.clear()
        self.cache[word] = got
        return got

    def forms(self, words: list[str]) -> list[str]:
        """form() of each word, in one stemWords call (the C's new words of a text; the C
        keeps them, so they skip the cache here)."""
        stemmer = self.stemmer
        stops = self.stopwords
        if stemmer is None:
            return ["" if w in stops else w for w in words]
        mapped = [_premap(self.code, w) for w in words] if self.code == "ro" else words
        stems = stemmer.stemWords(mapped)
        return ["" if w in stops else s or w for w, s in zip(words, stems, strict=True)]


def _premap(code: str, word: str) -> str:
    if code == "ro":  # Romanian written with cedillas (ş ţ) means comma-below (ș ț)
        return word.replace("ş", "ș").replace("ţ", "ț")
    return word


@cache
def _language(code: str) -> _Language:
    language = _Language(code, STOPWORDS.get(code, frozenset()), LANGUAGES.get(code), {})
    if _textnative is not None:
        language.native = _textnative.Forms(language.forms, _SLOW_CLASS)
    return language


def stem(word: str, lang: str) -> str:
    """One lowercase word's stem in a language (the word itself without a stemmer)."""
    stemmer = _language(lang).stemmer
    return (stemmer.stemWord(_premap(lang, word)) or word) if stemmer else word


# --- tokens --------------------------------------------------------------------------


def _normalize(text: str) -> str:
    if not text.isascii() and not unicodedata.is_normalized("NFKC", text):
        text = unicodedata.normalize("NFKC", text)
    return text.lower()


def _units(kind: str, run: str) -> list[str]:
    return _unicode().cluster.findall(run) if kind == "sea" else list(run)


def index_grams(kind: str, run: str) -> list[str]:
    """The n-grams the index stores for a CJK ("cjk") or Thai-like ("sea") run: one
    starting at every unit, so the last ones are shorter (a query shorter than n finds
    them by prefix)."""
    n = SEA_NGRAM if kind == "sea" else CJK_NGRAM
    units = _units(kind, run)
    return ["".join(units[i : i + n]) for i in range(len(units))]


def query_grams(kind: str, run: str) -> list[str]:
    """The n-grams a query matches for a run; a run shorter than n becomes one prefix
    term ("…*"), which finds it at the start of any indexed n-gram."""
    n = SEA_NGRAM if kind == "sea" else CJK_NGRAM
    units = _units(kind, run)
    if len(units) < n:
        return [run + "*"]
    return ["".join(units[i : i + n]) for i in range(len(units) - n + 1)]


def _runs(text: str) -> Iterable[tuple[str, str]]:
    """(kind, text) of normalised text: "word", or a "cjk" / "sea" run to cut into grams."""
    if text.isascii() or not _scripts().special.search(text):
        for word in _split_words(text):
            yield "word", word
        return
    for m in _unicode().token.finditer(text):
        yield m.lastgroup, m.group()


def _split_words(text: str) -> list[str]:
    """Runs of letters, marks and digits (of text with no CJK or Thai)."""
    if text.isascii():
        return text.translate(_ASCII_SPACES).split()
    if not _scripts().slow.search(text):
        return _FAST_WORD.findall(text)
    return _unicode().word.findall(text)


def words(text: str) -> list[str]:
    """The lowercase words of a text (CJK and Thai runs as their n-grams), none dropped."""
    out: list[str] = []
    for kind, token in _runs(_normalize(text)):
        if kind == "word":
            out.append(token)
        else:
            out += [g.rstrip("*") for g in query_grams(kind, token)]
    return out


_ANY_STOPWORD = frozenset().union(*STOPWORDS.values())


def query_terms(query: str) -> list[str]:
    """The words of a question, lowercased and unique, in order (CJK as bigrams), without
    stopwords of any language unless nothing else is left. For highlighting snippets."""
    terms = list(dict.fromkeys(words(query)))
    content = [t for t in terms if t not in _ANY_STOPWORD] or terms
    return content[:MAX_QUERY_TERMS]


def analyze(text: str, lang: str) -> str:
    """Text as the FTS table stores it for a note in `lang`: space-separated terms."""
    language = _language(lang if lang in LANGUAGES else "en")
    if language.native is not None:
        # The C lowers ASCII itself; it answers None for text of the `regex` split only.
        ascii = text.isascii()
        if not ascii:
            text = _normalize(text)
        got = language.native.analyze(text)
        if got is not None:
            return got
        return _analyze(_normalize(text) if ascii else text, language)
    return _analyze(_normalize(text), language)


def analyze_py(text: str, lang: str) -> str:
    """analyze() in Python only: the fallback, and the reference of the C."""
    return _analyze(_normalize(text), _language(lang if lang in LANGUAGES else "en"))


def _analyze(text: str, language: _Language) -> str:
    """analyze() of normalised text in Python."""
    if text.isascii() or not _scripts().special.search(text):
        tokens = _split_words(text)
        try:  # most texts hold only words seen before: one pass, no list, no None scan
            return " ".join(filter(None, map(language.cache.__getitem__, tokens)))
        except KeyError:
            pass
        forms = list(map(language.cache.get, tokens))
        if None in forms:
            form = language.form
            forms = [f if f is not None else form(t) for f, t in zip(forms, tokens, strict=True)]
        return " ".join(filter(None, forms))
    out: list[str] = []
    for kind, token in _runs(text):
        if kind == "word":
            out.append(language.form(token))
        else:
            out += index_grams(kind, token)
    return " ".join(filter(None, out))


# --- language detection ----------------------------------------------------------------

_CODE = [
    (re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S), " "),
    (re.compile(r"`[^`\n]*`"), " "),
    (re.compile(r"https?://\S+"), " "),
    (re.compile(r"\]\([^)]*\)"), "]"),
    (re.compile(r"<[^>\n]*>"), " "),
]

# word -> the languages whose stopword list has it
_STOP_INDEX: dict[str, tuple[str, ...]] = {}
for _lang, _words in STOPWORDS.items():
    for _w in _words:
        _STOP_INDEX[_w] = (*_STOP_INDEX.get(_w, ()), _lang)


# Elisions (l', d') and single letters of identifiers tell little about a language.
_DETECT_WORDS = frozenset(w for w in _STOP_INDEX if len(w) >= 2)
_STOP_WORDS = frozenset(_STOP_INDEX)


@lru_cache(maxsize=4096)
def _script_of_char(ch: str) -> str | None:
    if not ch.isalpha() and unicodedata.category(ch)[0] != "M":
        return None
    if ch.isascii():
        return "LATIN"
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return None
    first = name.split(" ", 1)[0]
    if first in ("HIRAGANA", "KATAKANA") or name.startswith("HALFWIDTH KATAKANA"):
        return "KANA"
    if first == "CJK":
        return "HAN" if "IDEOGRAPH" in name else None
    if first == "HANGUL":
        return "HANGUL"
    if first in ("LATIN", "CYRILLIC", "ARABIC", "DEVANAGARI") or first in _SCRIPT_LANGUAGE:
        return first
    return None


def script_counts(text: str, tokens: Iterable[str] | None = None) -> Counter[str]:
    """Letters per script (Han and kana counted apart) in the distinct words of a text, so
    that a table or a garbled line repeated a thousand times does not outvote the prose."""
    distinct = "".join(set(_split_words(text) if tokens is None else tokens))
    if distinct.isascii():
        return Counter({"LATIN": len(distinct)}) if distinct else Counter()
    counts: Counter[str] = Counter()
    for ch, n in Counter(distinct).items():
        script = _script_of_char(ch)
        if script is not None:
            counts[script] += n
    return counts


def _detection_sample(text: str) -> str:
    if _native is not None:  # the same sample (vault_brain/native/_mdscan.c)
        return _native.detection_sample(text, DETECT_CHARS)
    return detection_sample_py(text)


def detection_sample_py(text: str) -> str:
    """_detection_sample() in Python: the fallback, and the reference of the C one."""
    sample = text[: DETECT_CHARS * 2]
    for pattern, repl in _CODE:
        sample = pattern.sub(repl, sample)
    return sample[:DETECT_CHARS]


# Letters that (nearly) only one language of a shared script writes: a little evidence
# each, which settles close calls (tr/es, ro/it, pl/cs) that stopwords leave even.
_LETTERS = {
    "tr": "ığ",
    "ro": "șțăşţ",
    "pl": "łąęśźżń",
    "cs": "řěů",
    "sk": "ľĺŕô",
    "hu": "őű",
    "vi": "ươđạảấầẩẫậắằẳẵặẹẻẽếềểễệỉịọỏốồổỗộớờởỡợụủứừửữựỳỵỷỹ",
    "es": "ñ",
    "pt": "ãõ",
    "de": "ß",
    "ca": "ŀ",
    "uk": "іїєґ",
    "ru": "ыэъ",
    "fa": "پچژگکی",
    "ar": "ةكي",
}
_LETTER_LANG = {ch: lang for lang, letters in _LETTERS.items() for ch in letters}
LETTER_WEIGHT = 0.25
WORD_CAP = 3
# Ties go to the language more notes are likely to be written in.
_PRIORITY = {
    lang: i
    for i, lang in enumerate(
        "en es fr de pt it ru nl pl tr id vi uk ro cs sv hu el da fi no sk ca ar fa hi".split()
    )
}


def _best(scores: Counter[str], prefer: str | None = None) -> tuple[str, float]:
    lang = max(scores, key=lambda c: _rank(scores, c, prefer))
    return lang, scores[lang]


def _rank(scores: Counter[str], lang: str, prefer: str | None) -> tuple[float, bool, int]:
    return scores[lang], lang == prefer, -_PRIORITY.get(lang, len(_PRIORITY))


def _best_unordered(scores: Counter[str], prefer: str | None) -> tuple[str, float] | None:
    """_best() of scores in another order than _profile_scores() makes them (the C's), or
    None where that order would decide: another language ranks as the best does (then
    max() takes the first)."""
    top = max(scores.values())
    tops = [lang for lang, s in scores.items() if s == top]
    if len(tops) == 1:  # the score alone decides (most notes)
        return tops[0], top
    best, hits = _best(scores, prefer)
    rank = _rank(scores, best, prefer)
    return None if sum(_rank(scores, c, prefer) == rank for c in tops) > 1 else (best, hits)


def _profile_scores(
    tokens: Iterable[str],
    allowed: Iterable[str],
    text: str = "",
    distinct: Counter | None = None,
    letters: bool = False,
) -> Counter[str]:
    """Stopword hits per language (a word counts at most WORD_CAP times), plus a little for
    each letter only that language writes. `distinct` gets the distinct stopwords seen.
    Single letters count only when `letters` (a question's "a" or "y" is its own choice;
    in a note they are mostly pieces of identifiers and elisions)."""
    allowed = set(allowed)
    scores: Counter[str] = Counter()
    counts = Counter(tokens)
    # The vocabulary (every language's stopwords) is large: look its words up in the text
    # (frozenset.intersection walks its argument), not the other way round.
    for word in (_STOP_WORDS if letters else _DETECT_WORDS).intersection(counts):
        n = counts[word]
        for lang in _STOP_INDEX[word]:
            if lang in allowed:
                # A word repeated in markup or a table ("end", "de") is not prose.
                scores[lang] += min(n, WORD_CAP)
                if distinct is not None:
                    distinct[lang] += 1
    if text:
        _letter_scores(scores, text, allowed)
    return scores


def _letter_scores(scores: Counter[str], text: str, allowed: set[str]) -> None:
    for ch, n in Counter(text).items():
        lang = _LETTER_LANG.get(ch)
        if lang in allowed:
            scores[lang] += LETTER_WEIGHT * n


def _native_scores(
    counted: tuple[tuple[int, ...], tuple[int, ...]],
    allowed: Iterable[str],
    text: str,
    distinct: Counter[str],
) -> Counter[str]:
    """_profile_scores() of a note from the C's hits and distinct stopwords per language
    (textnative.Vocab.count, in _VOCAB_LANGUAGES' order): the same scores, in another
    order (which only a tie for the best breaks on: _detect() checks)."""
    hits, kinds = counted
    allowed = set(allowed)
    scores: Counter[str] = Counter()
    for i, lang in enumerate(_VOCAB_LANGUAGES):
        if hits[i] and lang in allowed:
            scores[lang] = hits[i]
            distinct[lang] = kinds[i]
    if text:
        _letter_scores(scores, text, allowed)
    return scores


def dominant_script(text: str, tokens: Iterable[str] | None = None) -> str | None:
    counts = script_counts(text, tokens)
    if not counts:
        return None
    # Kana and Han together are Japanese as soon as kana is a real part of them.
    han, kana = counts.pop("HAN", 0), counts.pop("KANA", 0)
    if han or kana:
        cjk = "KANA" if kana >= 0.1 * (han + kana) else "HAN"
        # Ideographs carry a word in one or two characters: weigh them like 3 letters.
        counts[cjk] = 3 * (han + kana)
    if "HANGUL" in counts:
        counts["HANGUL"] *= 3
    return counts.most_common(1)[0][0]


_VOCAB_LANGUAGES = tuple(STOPWORDS)


@cache
def _vocab() -> Any:
    """The C's table of every language's stopwords (textnative.Vocab), or None."""
    if _textnative is None:
        return None
    return _textnative.Vocab(_STOP_INDEX, _VOCAB_LANGUAGES, _SLOW_CLASS, WORD_CAP)


@cache
def _script_languages(script: str) -> tuple[str, ...]:
    """The languages with stopwords written in a script."""
    return tuple(c for c in STOPWORDS if script_of_language(c) == script)


def _sample_words(sample: str, vocab: Any) -> tuple[str, int, str | None, Any]:
    """A detection sample normalised (an ASCII one need not be lowered for the C), its
    number of words, its dominant script and what its scores come from: its words (a
    list), or the C's hits and distinct stopwords per language (a tuple)."""
    normalized = False
    if vocab is not None:
        if not sample.isascii():
            sample, normalized = _normalize(sample), True
        got = vocab.count(sample)
        if got is not None:
            ntokens, distinct, letters, hits, kinds = got
            if distinct is None:  # all ASCII: script_counts() would count them as Latin
                script = "LATIN" if letters else None
            else:  # set(distinct) is set(tokens): the same keys inserted in the same order
                script = dominant_script(sample, distinct)
            return sample, ntokens, script, (hits, kinds)
    if not normalized:
        sample = _normalize(sample)
    tokens = _split_words(sample)
    return sample, len(tokens), dominant_script(sample, tokens), tokens


def detect_language(text: str, candidates: Sequence[str] = (), default: str | None = None) -> str:
    """The language a text is written in: its dominant script, then (for scripts several
    languages share) the stopword profile with the most hits. `candidates` (configured
    languages) narrows the choice within a script they cover; `default` answers when
    there is no evidence (else the first candidate, else the script's usual language)."""
    return _detect(_detection_sample(text), candidates, default, _vocab())


def detect_language_py(
    text: str, candidates: Sequence[str] = (), default: str | None = None
) -> str:
    """detect_language() in Python only: the fallback, and the reference of the C."""
    return _detect(detection_sample_py(text), candidates, default, None)


def _detect(sample: str, candidates: Sequence[str], default: str | None, vocab: Any) -> str:
    raw = sample
    sample, ntokens, script, counted = _sample_words(sample, vocab)
    same_script = [c for c in candidates if script_of_language(c) == script]
    if script is None:
        return default or (candidates[0] if candidates else "en")
    if len(same_script) == 1:
        return same_script[0]
    if script in _SCRIPT_LANGUAGE and not same_script:
        return _SCRIPT_LANGUAGE[script]
    allowed = same_script or _script_languages(script)
    distinct: Counter[str] = Counter()
    letters = "" if sample.isascii() else sample
    if isinstance(counted, tuple):
        scores = _native_scores(counted, allowed, letters, distinct)
    else:
        scores = _profile_scores(counted, allowed, letters, distinct)
    fallback = default if default and script_of_language(default) == script else None
    if fallback is None and not same_script:
        fallback = _SCRIPT_DEFAULT.get(script)
    if scores:
        if isinstance(counted, tuple):
            got = _best_unordered(scores, fallback)
            if got is None:
                return _detect(raw, candidates, default, None)  # Python's order breaks a tie
            best, hits = got
        else:
            best, hits = _best(scores, fallback)
        # Prose is a third or more function words; a list of names or identifiers is not.
        # Another language than the fallback must win clearly, with three different words
        # at least: a title like "Comment on X" must not bring French (and French stems
        # in every query) into an English vault.
        if fallback and best != fallback:
            clear = hits >= 1.5 * scores.get(fallback, 0) + 1 and distinct[best] >= 3
        else:
            clear = True
        if hits >= 2 and hits >= MIN_EVIDENCE * ntokens and clear:
            return best
    if default and script_of_language(default) == script:
        return default
    if same_script:
        return same_script[0]
    return _SCRIPT_DEFAULT.get(script, _SCRIPT_LANGUAGE.get(script, "en"))


def note_language(text: str, frontmatter: str | None = None, configured: Sequence[str] = ()) -> str:
    """A note's language: frontmatter `lang:`, else detected (within the configured
    languages where they cover the note's script), else the first configured one."""
    if frontmatter:
        return frontmatter
    return detect_language(text, configured, configured[0] if configured else None)


# --- the query side --------------------------------------------------------------------


def query_language(
    tokens: Sequence[str], languages: Sequence[str], dominant: str | None
) -> set[str]:
    """The languages whose stopwords a query is written with: the vault language with the
    most stopword hits; the vault's main language wins unless another has clearly more."""
    scores = _profile_scores(tokens, languages, letters=True)
    if dominant is not None:
        scores[dominant] += 1.5
    if not scores:
        return set()
    top = max(scores.values())
    return {lang for lang, s in scores.items() if s == top}


def query_forms(
    query: str, languages: Sequence[str], dominant: str | None = None
) -> list[tuple[str, ...]]:
    """The terms of a question, each as the tuple of its forms in the vault's languages.

    Stopwords of the query's own language are dropped unless nothing else is left; n-grams
    (CJK, Thai) have one form. At most MAX_QUERY_TERMS words and MAX_QUERY_GRAMS n-grams,
    in order of appearance."""
    langs = [lang for lang in dict.fromkeys(languages) if lang in LANGUAGES] or ["en"]
    tokens: list[tuple[str, str]] = []
    for kind, token in _runs(_normalize(query)):
        if kind == "word":
            tokens.append(("word", token))
        else:
            tokens += [("gram", g) for g in query_grams(kind, token)]
    plain = [t for kind, t in tokens if kind == "word"]
    stop_langs = query_language(plain, langs, dominant)
    terms: list[tuple[str, ...]] = []
    dropped: list[tuple[str, ...]] = []
    seen: set[str] = set()
    words = grams = 0
    for kind, token in tokens:
        if token in seen:
            continue
        seen.add(token)
        if kind == "gram":
            if grams < MAX_QUERY_GRAMS:
                grams += 1
                terms.append((token,))
            continue
        if words >= MAX_QUERY_TERMS:
            continue
        forms = tuple(dict.fromkeys(_query_form(token, lang) for lang in langs))
        if any(token in STOPWORDS.get(lang, ()) for lang in stop_langs):
            dropped.append(forms)
        else:
            words += 1
            terms.append(forms)
    return terms or dropped[:MAX_QUERY_TERMS]


def _query_form(word: str, lang: str) -> str:
    stemmer = _language(lang).stemmer
    return (stemmer.stemWord(_premap(lang, word)) or word) if stemmer else word


def identity(configured: Sequence[str]) -> str:
    """What the index must have been analysed with; a different value means rebuild."""
    return f"v{ANALYZER_VERSION}:" + ",".join(configured)
