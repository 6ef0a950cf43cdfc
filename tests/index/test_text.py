"""Full-text rows and queries: what FTS5 is fed and what it is asked (index/text.py), on a
real FTS5 table with the index's own tokenizer."""

import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.index.analysis import MAX_QUERY_GRAMS
from vault_brain.index.schema import FTS_TOKENIZE
from vault_brain.index.text import MAX_QUERY_TERMS, fts_query, fts_text, query_terms


def fts_table(*docs: str):
    db = sqlean.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE t USING fts5(body, tokenize = "{FTS_TOKENIZE}")')
    db.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    return db


def search(db, question: str, languages=("en",)) -> list[int]:
    match = fts_query(question, languages)
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match,))
    return [rowid for (rowid,) in rows]


def test_cjk_run_becomes_overlapping_bigrams_with_a_tail():
    assert fts_text("向量数据库").split() == ["向量", "量数", "数据", "据库", "库"]


def test_single_cjk_character_stays_itself():
    assert fts_text("我 like tea").split() == ["我", "like", "tea"]


def test_cjk_run_is_separated_from_adjacent_latin_text():
    assert fts_text("abc中文def").split() == ["abc", "中文", "文", "def"]


def test_kana_and_hangul_become_bigrams():
    assert fts_text("ひらがな").split()[:3] == ["ひら", "らが", "がな"]
    assert fts_text("한국어").split()[:2] == ["한국", "국어"]


def test_text_is_lowercased_split_and_stemmed_without_stopwords():
    text = "Hello, wörld! The Notes — snake_case\n\n# Heading"
    assert fts_text(text, "en").split() == ["hello", "wörld", "note", "snake", "case", "head"]


def test_query_drops_stopwords():
    assert query_terms("What is the release checklist?") == ["release", "checklist"]


def test_query_of_only_stopwords_keeps_them():
    assert query_terms("what is it") == ["what", "is", "it"]


def test_query_terms_are_lowercased_and_unique():
    assert query_terms("Release release RELEASE notes") == ["release", "notes"]


def test_query_splits_on_underscore_and_punctuation_like_unicode61():
    assert query_terms("snake_case x-ray v1.2") == ["snake", "case", "x", "ray", "v1", "2"]


def test_query_terms_are_capped():
    question = " ".join(f"term{i}" for i in range(100))
    assert len(query_terms(question)) == MAX_QUERY_TERMS
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
    db = fts_table("some text", fts_text("中文 text"))
    for languages in (["en"], ["de", "en", "ja", "th"]):
        match = fts_query(question, languages)
        if match is not None:
            db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXYZé 1_,.!?\n中文数据库ひらがな한국어การตั้งค่า", min_size=1))
def test_indexed_text_is_found_by_its_own_words(text):
    indexed = fts_text(text, "en")
    db = fts_table(indexed)
    match = fts_query(text, ["en"])
    if match is not None and indexed:  # text of stopwords alone is not indexed
        assert db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall() == [(1,)]


def test_chinese_phrase_inside_a_sentence_is_found_by_a_chinese_query():
    db = fts_table(
        fts_text("我们今天讨论了向量数据库的设计和全文检索。", "zh"),
        fts_text("明天去公园散步，天气很好。", "zh"),
        fts_text("Vector databases store embeddings.", "en"),
    )
    assert search(db, "向量数据库", ["zh", "en"]) == [1]


def test_a_single_character_query_finds_the_word_inside_a_run():
    db = fts_table(fts_text("我家的猫很可爱", "zh"), fts_text("今天天气很好", "zh"))
    assert search(db, "猫", ["zh"]) == [1]


def test_question_finds_note_that_lacks_some_of_its_words():
    db = fts_table(
        fts_text("The release checklist: tag, build, publish.", "en"),
        fts_text("Groceries: milk and eggs.", "en"),
    )
    assert search(db, "What is our release process?") == [1]
