"""What FTS5 is fed and what it is asked: text analysed by text/analysis.py in a real FTS5
table with the index's own tokenizer, matched by the expression the SQLite backend builds
from an analysed query (every form quoted, no FTS5 syntax from user text)."""

from __future__ import annotations

import pytest
import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.index.sqlite.fulltext import match_groups
from vault_brain.index.sqlite.schema import FTS_TOKENIZE
from vault_brain.text.analysis import (
    MAX_QUERY_GRAMS,
    MAX_QUERY_TERMS,
    analyze,
    query_forms,
)


def fts_query(question: str, languages=("en",)) -> str | None:
    """A question as the MATCH expression the backend runs for it."""
    return match_groups(query_forms(question, languages))


# A plural or inflected form in a note and the base form in a question (or the reverse):
# the Snowball stemmer of each language must bring them together.
INFLECTIONS = [
    ("en", "My notes on linking", "note linked"),
    ("de", "Alle Notizen im Ordner", "Notiz"),
    ("fr", "Les liens entre les notes", "lien"),
    ("es", "Los enlaces internos", "enlace"),
    ("ru", "Все заметки в папке", "заметка"),
    ("it", "I collegamenti interni", "collegamento"),
    ("pt", "Os arquivos do cofre", "arquivo"),
    ("nl", "De notities in de map", "notitie"),
    ("sv", "Alla anteckningar i valvet", "anteckning"),
    ("da", "Noterne i mappen", "noter"),
    ("no", "Notatene i mappen", "notat"),
    ("fi", "Kaikki muistiinpanot", "muistiinpano"),
    ("hu", "A fájlok a mappában", "fájl"),
    ("ro", "Toate notițele din seif", "notiță"),
    ("tr", "Tüm notlar klasörde", "not"),
    ("pl", "Wszystkie notatki w folderze", "notatka"),
    ("cs", "Všechny poznámky ve složce", "poznámka"),
    ("ca", "Totes les notes de la carpeta", "nota"),
    ("id", "Semua catatannya di folder", "catatan"),
    ("el", "Όλες οι σημειώσεις", "σημείωση"),
    ("ar", "جميع الملاحظات في المجلد", "ملاحظة"),
    ("fa", "همه یادداشت‌ها در پوشه", "یادداشت"),
    ("hi", "सभी नोटों को देखें", "नोट"),
]


def fts_table(*docs: str):
    db = sqlean.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE t USING fts5(body, tokenize = "{FTS_TOKENIZE}")')
    db.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    return db


def found(db, query: str, languages) -> list[int]:
    match = match_groups(query_forms(query, languages))
    if match is None:
        return []
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match,))
    return [r for (r,) in rows]


@pytest.mark.parametrize(("lang", "note", "query"), INFLECTIONS, ids=[i[0] for i in INFLECTIONS])
def test_an_inflected_form_finds_its_note(lang, note, query):
    db = fts_table(analyze(note, lang), analyze("something else entirely", "en"))
    assert found(db, query, [lang]) == [1]


def test_diacritics_are_folded_by_fts_so_a_query_without_them_matches():
    db = fts_table(analyze("Résumé de la réunion", "fr"))
    assert found(db, "resume reunion", ["fr"]) == [1]


@pytest.mark.parametrize(
    ("lang", "note", "query"),
    [
        ("zh", "我们讨论了向量数据库的设计", "向量数据库"),
        ("ja", "ノートを削除する方法について", "ノートの削除"),
        ("ko", "노트를 삭제하는 방법", "노트 삭제"),
        ("th", "การตั้งค่าโน้ตของคุณ", "ตั้งค่าโน้ต"),
        ("km", "ការកំណត់កំណត់ត្រារបស់អ្នក", "ការកំណត់"),
    ],
)
def test_scripts_without_spaces_are_found_by_their_ngrams(lang, note, query):
    db = fts_table(analyze(note, lang), analyze("Something else entirely", "en"))
    assert found(db, query, [lang, "en"]) == [1]


def test_a_thai_word_shorter_than_a_trigram_is_found_by_prefix():
    db = fts_table(analyze("การตั้งค่าโน้ตของคุณ", "th"), analyze("อื่น ๆ", "th"))
    assert found(db, "โน้ต", ["th"]) == [1]


def test_a_query_finds_notes_in_every_language_of_the_vault():
    db = fts_table(
        analyze("Gelöschte Notizen wiederherstellen", "de"),
        analyze("Restoring deleted notes", "en"),
        analyze("Удалённые заметки можно восстановить", "ru"),
    )
    languages = ["en", "de", "ru"]
    assert found(db, "Notiz", languages) == [1]
    assert found(db, "deleting a note", languages) == [2]
    assert found(db, "заметка", languages) == [3]


def test_each_term_ors_its_forms_in_the_vault_languages():
    terms = query_forms("Notizen", ["de", "en"])
    assert match_groups(terms) == '("notiz" OR "notizen")'


def test_fts_syntax_in_a_question_is_quoted_away():
    match = match_groups(query_forms('NEAR(a b) OR "x" AND body:y* -z', ["en", "de"]))
    db = fts_table(analyze("a body of text", "en"))
    db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()
    assert "NEAR(" not in match and ":" not in match


def search(db, question: str, languages=("en",)) -> list[int]:
    match = fts_query(question, languages)
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match,))
    return [rowid for (rowid,) in rows]


def test_query_terms_are_capped():
    question = " ".join(f"term{i}" for i in range(100))
    assert fts_query(question).count(" OR ") == MAX_QUERY_TERMS - 1


def test_a_long_cjk_question_keeps_more_bigrams_than_words():
    question = "".join(chr(0x4E00 + i) for i in range(200))
    assert fts_query(question, ["zh"]).count(" OR ") == MAX_QUERY_GRAMS - 1


def test_query_is_or_of_quoted_stems():
    assert fts_query("release checklists") == '"releas" OR "checklist"'


def test_query_operators_and_quotes_become_plain_terms():
    assert (
        fts_query('say "hi" NEAR(x) body:y*') == '"sai" OR "hi" OR "near" OR "x" OR "bodi" OR "y"'
    )


def test_cjk_query_becomes_bigram_terms():
    assert fts_query("数据库", ["zh"]) == '"数据" OR "据库"'


def test_one_cjk_character_is_a_prefix_query():
    assert fts_query("猫", ["zh"]) == '"猫"*'


def test_query_without_terms_is_none():
    assert fts_query("?!  ...") is None
    assert fts_query("") is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_query_compiles_in_fts5(question):
    db = fts_table("some text", analyze("中文 text", "en"))
    for languages in (["en"], ["de", "en", "ja", "th"]):
        match = fts_query(question, languages)
        if match is not None:
            db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXYZé 1_,.!?\n中文数据库ひらがな한국어การตั้งค่า", min_size=1))
def test_indexed_text_is_found_by_its_own_words(text):
    indexed = analyze(text, "en")
    db = fts_table(indexed)
    match = fts_query(text, ["en"])
    if match is not None and indexed:  # text of stopwords alone is not indexed
        assert db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall() == [(1,)]


def test_chinese_phrase_inside_a_sentence_is_found_by_a_chinese_query():
    db = fts_table(
        analyze("我们今天讨论了向量数据库的设计和全文检索。", "zh"),
        analyze("明天去公园散步，天气很好。", "zh"),
        analyze("Vector databases store embeddings.", "en"),
    )
    assert search(db, "向量数据库", ["zh", "en"]) == [1]


def test_a_single_character_query_finds_the_word_inside_a_run():
    db = fts_table(analyze("我家的猫很可爱", "zh"), analyze("今天天气很好", "zh"))
    assert search(db, "猫", ["zh"]) == [1]


def test_question_finds_note_that_lacks_some_of_its_words():
    db = fts_table(
        analyze("The release checklist: tag, build, publish.", "en"),
        analyze("Groceries: milk and eggs.", "en"),
    )
    assert search(db, "What is our release process?") == [1]
