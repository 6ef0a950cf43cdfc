import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.index.text import MAX_QUERY_TERMS, fts_query, fts_text, query_terms

TOKENIZE = "porter unicode61 remove_diacritics 2"


def fts_table(*docs: str):
    db = sqlean.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize = '{TOKENIZE}')")
    db.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(docs, 1))
    return db


def search(db, question: str) -> list[int]:
    match = fts_query(question)
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (match,))
    return [rowid for (rowid,) in rows]


def test_cjk_run_becomes_overlapping_bigrams():
    assert fts_text("向量数据库").split() == ["向量", "量数", "数据", "据库"]


def test_single_cjk_character_stays_itself():
    assert fts_text("我 like tea").split() == ["我", "like", "tea"]


def test_cjk_run_is_separated_from_adjacent_latin_text():
    assert fts_text("abc中文def").split() == ["abc", "中文", "def"]


def test_kana_and_hangul_become_bigrams():
    assert fts_text("ひらがな").split() == ["ひら", "らが", "がな"]
    assert fts_text("한국어").split() == ["한국", "국어"]


def test_text_without_cjk_is_unchanged():
    text = "Hello, wörld! Привет 123 — snake_case\n\n# Heading"
    assert fts_text(text) == text


def test_query_drops_stopwords():
    assert query_terms("What is the release checklist?") == ["release", "checklist"]


def test_query_of_only_stopwords_keeps_them():
    assert query_terms("what is it") == ["what", "is", "it"]


def test_query_terms_are_lowercased_and_unique():
    assert query_terms("Release release RELEASE notes") == ["release", "notes"]


def test_query_splits_on_underscore_and_punctuation_like_unicode61():
    assert query_terms("snake_case e-mail v1.2") == ["snake", "case", "e", "mail", "v1", "2"]


def test_query_terms_are_capped():
    question = " ".join(f"term{i}" for i in range(100))
    assert len(query_terms(question)) == MAX_QUERY_TERMS


def test_query_is_or_of_quoted_terms():
    assert fts_query("release checklist") == '"release" OR "checklist"'


def test_query_operators_and_quotes_become_plain_terms():
    assert (
        fts_query('say "hi" NEAR(x) body:y*') == '"say" OR "hi" OR "near" OR "x" OR "body" OR "y"'
    )


def test_cjk_query_becomes_bigram_terms():
    assert fts_query("数据库") == '"数据" OR "据库"'


def test_query_without_terms_is_none():
    assert fts_query("?!  ...") is None
    assert fts_query("") is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_query_compiles_in_fts5(question):
    db = fts_table("some text", fts_text("中文 text"))
    match = fts_query(question)
    if match is not None:
        db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abcXYZé 1_,.!?\n中文数据库ひらがな한국어", min_size=1))
def test_indexed_text_is_found_by_its_own_words(text):
    db = fts_table(fts_text(text))
    match = fts_query(text)
    if match is not None:
        assert db.execute("SELECT rowid FROM t WHERE t MATCH ?", (match,)).fetchall() == [(1,)]


def test_chinese_phrase_inside_a_sentence_is_found_by_a_chinese_query():
    db = fts_table(
        fts_text("我们今天讨论了向量数据库的设计和全文检索。"),
        fts_text("明天去公园散步，天气很好。"),
        fts_text("Vector databases store embeddings."),
    )
    assert search(db, "向量数据库") == [1]


def test_question_finds_note_that_lacks_some_of_its_words():
    db = fts_table("The release checklist: tag, build, publish.", "Groceries: milk and eggs.")
    assert search(db, "What is our release process?") == [1]
