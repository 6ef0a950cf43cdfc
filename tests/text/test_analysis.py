"""Language-aware analysis (text/analysis.py): stemming, stopwords, scripts, detection,
the words of a question, and queries that find notes whatever their language through a real
Brain. How a backend matches the analysed terms is tested with the backend
(tests/index/sqlite/test_fts_match.py for SQLite's FTS5)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.text import analysis
from vault_brain.text.analysis import (
    analyze,
    detect_language,
    frontmatter_language,
    normalize_language,
    note_language,
    query_forms,
    query_terms,
)


@pytest.mark.parametrize(
    ("lang", "a", "b"),
    [("de", "Notizen", "Notiz"), ("ru", "заметки", "заметка"), ("fr", "liens", "lien")],
)
def test_the_issue_examples_share_a_stem(lang, a, b):
    assert analyze(a, lang) == analyze(b, lang)


@pytest.mark.parametrize(
    ("lang", "text", "stopwords"),
    [
        ("en", "The notes of the day", {"the", "of"}),
        ("de", "Die Notizen und der Ordner", {"die", "und", "der"}),
        ("fr", "Les liens et la note", {"les", "et", "la"}),
        ("ru", "Заметки и папки в хранилище", {"и", "в"}),
    ],
)
def test_stopwords_of_the_note_language_are_not_indexed(lang, text, stopwords):
    assert not stopwords & set(analyze(text, lang).split())


def test_a_language_without_a_stemmer_keeps_its_words():
    assert analyze("Усі нотатки", "uk").split() == ["усі", "нотатки"]


def test_devanagari_vowel_signs_stay_inside_their_word():
    assert analyze("हिन्दी भाषा", "hi").split() == [analysis.stem("हिन्दी", "hi"), "भाष"]


def test_each_term_ors_its_forms_in_the_vault_languages():
    terms = query_forms("Notizen", ["de", "en"])
    assert terms == [("notiz", "notizen")]


def test_stopwords_of_the_question_language_are_dropped_from_the_query():
    assert query_forms("Wie lösche ich eine Notiz", ["de", "en"], "de") == [
        ("losch", "lösche"),
        ("notiz",),
    ]


def test_a_question_of_stopwords_only_keeps_them():
    assert query_forms("what is it", ["en"]) == [("what",), ("i",), ("it",)]  # stems


TEXTS = {
    "en": "You can link notes to each other and see which notes link back to the one you are in.",
    "de": "Du kannst Notizen miteinander verknüpfen und sehen, welche Notizen auf die aktuelle "
    "Notiz verweisen.",
    "fr": "Vous pouvez relier des notes entre elles et voir quelles notes pointent vers celle "
    "que vous consultez.",
    "es": "Puedes enlazar notas entre sí y ver qué notas apuntan a la que estás leyendo.",
    "it": "Puoi collegare le note tra loro e vedere quali note rimandano a quella che stai "
    "leggendo.",
    "pt": "Você pode ligar notas entre si e ver quais notas apontam para a que você está lendo.",
    "nl": "Je kunt notities aan elkaar koppelen en zien welke notities naar de huidige notitie "
    "verwijzen.",
    "ru": "Вы можете связывать заметки друг с другом и видеть, какие заметки ссылаются на текущую.",
    "uk": "Ви можете пов'язувати нотатки між собою і бачити, які нотатки посилаються на поточну.",
    "pl": "Możesz łączyć notatki ze sobą i widzieć, które notatki odsyłają do bieżącej.",
    "tr": "Notları birbirine bağlayabilir ve hangi notların şu anki nota bağlantı verdiğini "
    "görebilirsiniz.",
    "ja": "ノート同士をリンクして、どのノートが今のノートにリンクしているかを確認できます。",
    "zh": "你可以把笔记互相链接，并查看哪些笔记链接到当前笔记。",
    "ko": "노트를 서로 연결하고 어떤 노트가 현재 노트에 연결되어 있는지 볼 수 있습니다.",
    "th": "คุณสามารถเชื่อมโยงโน้ตเข้าด้วยกันและดูว่าโน้ตใดลิงก์มายังโน้ตปัจจุบัน",
    "km": "អ្នកអាចភ្ជាប់កំណត់ត្រាទៅគ្នាទៅវិញទៅមក",
    "ar": "يمكنك ربط الملاحظات ببعضها ومعرفة الملاحظات التي تشير إلى الملاحظة الحالية.",
    "fa": "شما می‌توانید یادداشت‌ها را به هم پیوند دهید و ببینید کدام یادداشت‌ها به این "
    "یادداشت پیوند دارند.",
    "el": "Μπορείτε να συνδέσετε σημειώσεις μεταξύ τους και να δείτε ποιες σημειώσεις "
    "παραπέμπουν στην τρέχουσα.",
    "he": "אתה יכול לקשר פתקים זה לזה ולראות אילו פתקים מקשרים אל הפתק הנוכחי.",
}


@pytest.mark.parametrize(("lang", "text"), TEXTS.items(), ids=list(TEXTS))
def test_the_detector_names_the_language_of_a_paragraph(lang, text):
    assert detect_language(text) == lang


def test_code_in_a_note_does_not_make_it_english():
    note = TEXTS["de"] + "\n\n```python\nif x is not None and y in z:\n    return the_value\n```\n"
    assert detect_language(note) == "de"


def test_a_title_with_one_foreign_function_word_stays_in_the_default_language():
    assert detect_language("# A Comment on Optimal Tree Structures") == "en"
    assert detect_language("# Chi-Squared Integral (Algorithm 299)") == "en"


def test_configured_languages_narrow_detection_and_give_the_fallback():
    assert detect_language(TEXTS["nl"], ["de", "en"]) in ("de", "en")
    assert note_language("Einkaufsliste Milch Brot", None, ["de"]) == "de"
    assert note_language("Milch Brot", None, ()) == "en"


def test_a_configured_language_of_another_script_does_not_hide_the_note_script():
    assert detect_language(TEXTS["ja"], ["de"]) == "ja"


def test_frontmatter_language_wins():
    assert note_language(TEXTS["en"], "de", ()) == "de"


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("---\nlang: de\ntitle: x\n---\nbody", "de"),
        ("---\ntitle: x\nlanguage: 'fr-FR'\n---\nbody", "fr"),
        ('---\nlanguage: "German"\n---\n', "de"),
        ("---\nlang: pt_BR # Brazil\n---\n", "pt"),
        ("---\nmeta:\n  lang: de\n---\nbody", None),
        ("---\nlang: klingon\n---\n", None),
        ("no frontmatter\nlang: de\n", None),
    ],
)
def test_frontmatter_lang_key(text, lang):
    assert frontmatter_language(text) == lang


def test_language_names_and_regional_codes_are_normalised():
    assert normalize_language("de-AT") == "de"
    assert normalize_language("nb") == "no"
    assert normalize_language("Français") == "fr"
    assert normalize_language("zh-TW") == "zh"
    assert normalize_language("xx") is None
    assert normalize_language(3) is None


def test_the_analyser_identity_names_version_and_languages():
    assert analysis.identity(["de", "en"]) == f"v{analysis.ANALYZER_VERSION}:de,en"
    assert analysis.identity([]) != analysis.identity(["en"])


def test_a_german_inflection_is_found_through_brain(vault, make_brain):
    vault.write(
        "Notizen verwalten.md",
        "# Notizen verwalten\n\nSo löschst du alte Notizen, die du nicht mehr brauchst.\n",
    )
    vault.write("Deploy.md", "# Deploy\n\nHow we ship the service to production.\n")
    brain = make_brain()
    hits = brain.search("Wie lösche ich eine Notiz?", mode="fts").hits
    assert hits and hits[0].path == "Notizen verwalten.md"


def test_notes_in_two_languages_are_each_found_by_their_own_inflections(vault, make_brain):
    vault.write("de.md", "# Ordner\n\nDie Notizen liegen in Ordnern, die du selbst anlegst.\n")
    vault.write("ru.md", "# Папки\n\nЗаметки лежат в папках, которые вы создаёте сами.\n")
    vault.write("en.md", "# Folders\n\nNotes live in folders that you create yourself.\n")
    brain = make_brain()
    assert brain.search("Notiz Ordner", mode="fts").hits[0].path == "de.md"
    assert brain.search("заметка папка", mode="fts").hits[0].path == "ru.md"
    assert brain.search("folder", mode="fts").hits[0].path == "en.md"


def test_frontmatter_lang_decides_how_a_note_is_analysed(vault, make_brain):
    # Two words give the detector nothing to go on; the frontmatter says German.
    vault.write("a.md", "---\nlang: de\n---\nNotizen Ordner\n")
    brain = make_brain()
    assert [h.path for h in brain.search("Notiz", mode="fts").hits] == ["a.md"]


def test_changing_the_configured_languages_reanalyses_every_note(vault, make_brain):
    vault.write("a.md", "Notizen Ordner\n")  # no function words: detected as the fallback
    first = make_brain()
    assert first.search("Notiz", mode="fts").hits == []  # analysed as English
    first.close()
    second = make_brain(text={"languages": ["de"]})  # the sync sees the new analyser
    assert [h.path for h in second.search("Notiz", mode="fts").hits] == ["a.md"]


def test_threads_analysing_at_once_get_what_one_thread_gets():
    import threading

    texts = [(TEXTS[lang], lang) for lang in ("de", "ru", "fr", "es", "nl", "pl")]
    expected = [analyze(t, lang) for t, lang in texts]
    analysis._language.cache_clear()  # cold caches: the stemmers themselves run in threads
    results: list[list[str]] = []

    def work() -> None:
        results.append([analyze(t, lang) for _ in range(50) for t, lang in texts][-6:])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [expected] * 4


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127)))
def test_ascii_text_splits_into_the_words_of_letters_and_digits(text):
    # ASCII takes a translate-and-split path: the same words as the regex that defines them.
    assert analysis._split_words(text) == re.findall(r"[A-Za-z0-9]+", text)


def test_cjk_run_becomes_overlapping_bigrams_with_a_tail():
    assert analyze("向量数据库", "en").split() == ["向量", "量数", "数据", "据库", "库"]


def test_single_cjk_character_stays_itself():
    assert analyze("我 like tea", "en").split() == ["我", "like", "tea"]


def test_cjk_run_is_separated_from_adjacent_latin_text():
    assert analyze("abc中文def", "en").split() == ["abc", "中文", "文", "def"]


def test_kana_and_hangul_become_bigrams():
    assert analyze("ひらがな", "en").split()[:3] == ["ひら", "らが", "がな"]
    assert analyze("한국어", "en").split()[:2] == ["한국", "국어"]


def test_text_is_lowercased_split_and_stemmed_without_stopwords():
    text = "Hello, wörld! The Notes — snake_case\n\n# Heading"
    assert analyze(text, "en").split() == ["hello", "wörld", "note", "snake", "case", "head"]


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
    assert len(query_terms(question)) == analysis.MAX_QUERY_TERMS


def test_analysis_is_the_same_whether_its_words_were_seen_before_or_not():
    from vault_brain.text.analysis import _language

    text = "The runners were running; a runner runs. Ökonomie und naïve Wörter."
    cache = _language("en").cache
    cache.clear()
    cold = analyze(text, "en")
    warm = analyze(text, "en")  # every word's form is remembered now: the one-pass path
    cache.pop("runners", None)  # one word unseen again: the path that fills it
    assert cold == warm == analyze(text, "en") == "runner run runner run ökonomi und naïv wörter"
