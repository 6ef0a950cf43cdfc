"""Full-text normalisation shared by indexing and querying.

The FTS5 table uses `porter unicode61 remove_diacritics 2`, which splits on spaces and
punctuation only: a Chinese or Japanese sentence would be one giant token, unfindable by
any shorter query. Runs of CJK ideographs, kana and hangul are therefore rewritten, on
both sides, into overlapping character bigrams ("向量数据库" → "向量 量数 数据 据库"),
which FTS5 then indexes and matches as ordinary terms.

Queries come from models as natural-language questions, so `fts_query` keeps the content
words, drops English stopwords, quotes every term (no FTS5 operator or syntax error can
come from user text) and joins them with OR so that bm25 ranks notes by how many terms
they share instead of requiring all of them.
"""

from __future__ import annotations

import re

MAX_QUERY_TERMS = 32

# Han (with extensions and compatibility ideographs), the ideographic iteration marks,
# hiragana, katakana (with phonetic extensions and half-width forms), hangul jamo and
# syllables.
_CJK_RANGES = (
    "\u1100-\u11ff"
    "\u3005-\u3007"
    "\u3040-\u309f"
    "\u30a0-\u30ff"
    "\u3130-\u318f"
    "\u31f0-\u31ff"
    "\u3400-\u4dbf"
    "\u4e00-\u9fff"
    "\ua960-\ua97f"
    "\uac00-\ud7af"
    "\ud7b0-\ud7ff"
    "\uf900-\ufaff"
    "\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_CJK_RUN = re.compile(f"[{_CJK_RANGES}]+")
# A query term as unicode61 sees one (letters and digits; "_" and punctuation separate),
# with CJK runs taken apart so they can become bigrams.
_TERM = re.compile(f"(?P<cjk>[{_CJK_RANGES}]+)|[^\\W_{_CJK_RANGES}]+")

STOPWORDS = frozenset(
    """
    a about above after again all also am an and any are as at be been before being
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this
    those through to too under until up very was we were what when where which while who
    whom whose why will with would you your yours s t d ll m re ve
    """.split()
)


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of a CJK run; a single character stays itself."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def _spaced_bigrams(match: re.Match[str]) -> str:
    return " " + " ".join(bigrams(match.group())) + " "


def fts_text(text: str) -> str:
    """Text as it goes into the FTS5 table: CJK runs become spaced bigrams."""
    return _CJK_RUN.sub(_spaced_bigrams, text)


def query_terms(query: str) -> list[str]:
    """The search terms of a question, lowercased and unique, in order of appearance.

    English stopwords are dropped unless nothing else is left. At most MAX_QUERY_TERMS.
    Useful on its own for highlighting snippets.
    """
    terms: list[str] = []
    for m in _TERM.finditer(query):
        if m.group("cjk"):
            terms.extend(bigrams(m.group()))
        else:
            terms.append(m.group().lower())
    content = [t for t in terms if t not in STOPWORDS] or terms
    return list(dict.fromkeys(content))[:MAX_QUERY_TERMS]


def fts_query(query: str) -> str | None:
    """A question as an FTS5 MATCH expression (OR of quoted terms); None if it has no terms."""
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
