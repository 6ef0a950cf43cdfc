"""The export readers on real-shaped files: what they keep, what they leave out, and the
error (file and place) for each way an export can be broken."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.importers.exports import (
    chatgpt_conversation,
    chatgpt_node,
    claude_conversation,
    claude_message,
    write_json,
    write_jsonl,
)
from vault_brain.errors import InvalidExport
from vault_brain.importers import read_export
from vault_brain.importers.records import Message, message_hashes

# --- Claude ------------------------------------------------------------------------------


def test_claude_conversation_keeps_speakers_text_and_times(tmp_path):
    conv = claude_conversation(
        "5b1c", "Canary analysis", [("human", "Why did it pass?"), ("assistant", "Latency.")]
    )
    (c,) = read_export("claude", [write_json(tmp_path / "conversations.json", [conv])])
    assert (c.source, c.id, c.key, c.title) == ("claude", "5b1c", "claude:5b1c", "Canary analysis")
    assert c.created == "2026-11-30T09:00:00Z" and c.updated == "2026-11-30T09:01:30Z"
    assert c.messages == (
        Message("user", "Why did it pass?", "2026-11-30T09:00:00Z"),
        Message("assistant", "Latency.", "2026-11-30T09:01:00Z"),
    )


def test_claude_reads_text_blocks_and_leaves_out_thinking_and_tools(tmp_path):
    blocks = [
        {"type": "thinking", "thinking": "let me think"},
        {"type": "text", "text": "First part."},
        {"type": "tool_use", "name": "web_search", "input": {"query": "x"}},
        {"type": "tool_result", "content": [{"type": "text", "text": "raw"}]},
        {"type": "text", "text": "Second part."},
    ]
    conv = claude_conversation("c1", "t", [])
    conv["chat_messages"] = [
        claude_message("m0", "assistant", "", "2026-11-30T09:00:00Z", blocks=blocks)
    ]
    (c,) = read_export("claude", [write_json(tmp_path / "c.json", [conv])])
    assert c.messages[0].text == "First part.\n\nSecond part."


def test_claude_falls_back_to_text_and_names_attachments(tmp_path):
    msg = claude_message("m0", "human", "See the file.", "2026-11-30T09:00:00Z", blocks=[])
    msg["attachments"] = [{"file_name": "plan.txt", "extracted_content": "...", "file_size": 3}]
    msg["files"] = [{"file_name": "diagram.png"}]
    conv = claude_conversation("c1", "t", [])
    conv["chat_messages"] = [msg]
    (c,) = read_export("claude", [write_json(tmp_path / "c.json", [conv])])
    assert c.messages[0].text == "See the file.\n\n*Attached: plan.txt, diagram.png*"


def test_claude_message_without_text_is_an_error_naming_its_place(tmp_path):
    conv = claude_conversation("c1", "t", [("human", "a"), ("assistant", "b")])
    del conv["chat_messages"][1]["text"]
    del conv["chat_messages"][1]["content"]
    path = write_json(tmp_path / "conversations.json", [claude_conversation("c0", "x", []), conv])
    with pytest.raises(InvalidExport) as err:
        read_export("claude", [path])
    assert "conversations.json [1].chat_messages[1]" in err.value.message
    assert "no text" in err.value.message


def test_claude_unknown_sender_is_an_error(tmp_path):
    conv = claude_conversation("c1", "t", [("human", "a")])
    conv["chat_messages"][0]["sender"] = "robot"
    with pytest.raises(InvalidExport, match=r"\[0\]\.chat_messages\[0\]: 'sender'"):
        read_export("claude", [write_json(tmp_path / "c.json", [conv])])


def test_a_chatgpt_export_given_as_claude_says_what_is_wrong(tmp_path):
    path = write_json(tmp_path / "c.json", [chatgpt_conversation("g1", "t", [("user", "hi")])])
    with pytest.raises(InvalidExport, match=r"c\.json \[0\]: .*uuid.*Claude's export"):
        read_export("claude", [path])


def test_truncated_json_names_line_and_column_and_says_the_file_ends(tmp_path):
    text = json.dumps([claude_conversation("c1", "t", [("human", "hello there")])], indent=1)
    path = tmp_path / "conversations.json"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    with pytest.raises(InvalidExport) as err:
        read_export("claude", [path])
    msg = err.value.message
    assert msg.startswith("conversations.json: line ")
    assert "ends too early" in msg


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "empty file"),
        ('{"a": 1}', "object without one"),
        ('"text"', "not a JSON list"),
        ("[1, 2]", "[0]: a conversation must be an object, not a number"),
        ("[{}] tail", "[0]: the conversation has no 'uuid'"),
    ],
)
def test_wrong_shapes_are_errors(tmp_path, content, expected):
    path = tmp_path / "c.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidExport) as err:
        read_export("claude", [path])
    assert expected in err.value.message


def test_extra_text_after_the_list_is_an_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("[]\n]", encoding="utf-8")
    with pytest.raises(InvalidExport, match="line 2, column 1: extra text"):
        read_export("claude", [path])


def test_a_list_under_conversations_and_the_export_zip_are_read(tmp_path):
    conv = claude_conversation("c1", "t", [("human", "a")])
    wrapped = write_json(tmp_path / "wrapped.json", {"conversations": [conv]})
    archive = tmp_path / "data-2026-11-30.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("users.json", "[]")
        z.writestr("conversations.json", json.dumps([conv]))
    assert [c.id for c in read_export("claude", [wrapped, archive])] == ["c1", "c1"]


def test_a_zip_without_conversations_json_is_an_error(tmp_path):
    archive = tmp_path / "other.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("notes.txt", "x")
    with pytest.raises(InvalidExport, match="holds no conversations.json"):
        read_export("claude", [archive])


def test_missing_file_and_bad_bytes_are_errors(tmp_path):
    with pytest.raises(InvalidExport, match="no such file"):
        read_export("claude", [tmp_path / "nope.json"])
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[{"uuid": "\xff\xfe"}]')
    with pytest.raises(InvalidExport, match="not UTF-8"):
        read_export("claude", [bad])


def test_a_file_larger_than_the_read_buffer_is_read_item_by_item(tmp_path):
    """3,000 conversations, several megabytes: read across many buffer refills, and an
    error near the end still names its true line."""
    convs = [
        claude_conversation(f"c{i}", f"Chat {i}", [("human", "word " * 200)]) for i in range(3000)
    ]
    path = write_json(tmp_path / "big.json", convs)
    assert path.stat().st_size > 4 << 20
    found = read_export("claude", [path])
    assert len(found) == 3000 and found[-1].id == "c2999"
    text = path.read_text(encoding="utf-8")
    cut = text.rindex('"sender": "human"')
    path.write_text(text[:cut] + '"sender": "robot"' + text[cut + 17 :], encoding="utf-8")
    with pytest.raises(InvalidExport, match=r"big\.json \[2999\]\.chat_messages\[0\]"):
        read_export("claude", [path])
    broken = text[:cut] + "@" + text[cut:]
    path.write_text(broken, encoding="utf-8")
    line = broken[:cut].count("\n") + 1
    with pytest.raises(InvalidExport, match=f"line {line}, column "):
        read_export("claude", [path])


# --- ChatGPT -----------------------------------------------------------------------------


def test_chatgpt_follows_the_path_to_the_current_node(tmp_path):
    """An edited question and a regenerated answer leave branches; the export's
    current_node says which one the person saw last."""
    conv = chatgpt_conversation("g1", "Retry storm", [("user", "Q1"), ("assistant", "A1")])
    m = conv["mapping"]
    m["g1-n1"]["children"] = []
    m["g1-n0"]["children"] = ["g1-n1", "regen"]
    m["regen"] = chatgpt_node("regen", "assistant", "A1, regenerated", "g1-n0", [], 1.8e9)
    conv["current_node"] = "regen"
    (c,) = read_export("chatgpt", [write_json(tmp_path / "conversations.json", [conv])])
    assert [x.text for x in c.messages] == ["Q1", "A1, regenerated"]
    assert (c.key, c.title) == ("chatgpt:g1", "Retry storm")
    assert c.created == "2026-11-18T11:06:40Z"
    assert c.messages[0].created == "2026-11-18T11:06:40Z"


def test_chatgpt_without_current_node_takes_the_newest_branch(tmp_path):
    conv = chatgpt_conversation("g1", "t", [("user", "Q1"), ("assistant", "A1")])
    m = conv["mapping"]
    m["g1-n0"]["children"] = ["g1-n1", "regen"]
    m["regen"] = chatgpt_node("regen", "assistant", "A2", "g1-n0", [], 1.8e9)
    conv["current_node"] = None
    (c,) = read_export("chatgpt", [write_json(tmp_path / "c.json", [conv])])
    assert [x.text for x in c.messages] == ["Q1", "A2"]


def test_chatgpt_leaves_out_system_tool_hidden_and_reasoning(tmp_path):
    conv = chatgpt_conversation(
        "g1",
        "t",
        [("user", "Plot it"), ("assistant", "x"), ("tool", "output"), ("assistant", "Done.")],
    )
    m = conv["mapping"]
    m["g1-n1"]["message"]["recipient"] = "python"  # a call to the code tool
    m["g1-n1"]["message"]["content"] = {"content_type": "code", "language": "python", "text": "1"}
    m["g1-n3"]["message"]["content"] = {
        "content_type": "multimodal_text",
        "parts": [
            {"content_type": "image_asset_pointer", "asset_pointer": "sediment://file_1"},
            "Done.",
        ],
    }
    thought = chatgpt_node(
        "think",
        "assistant",
        None,
        "g1-n0",
        ["g1-n1"],
        1.8e9,
        content={"content_type": "thoughts", "thoughts": [{"summary": "s", "content": "c"}]},
    )
    m["g1-n0"]["children"] = ["think"]
    m["g1-n1"]["parent"] = "think"
    m["think"] = thought
    (c,) = read_export("chatgpt", [write_json(tmp_path / "c.json", [conv])])
    assert [(x.role, x.text) for x in c.messages] == [
        ("user", "Plot it"),
        ("assistant", "*[image]*\n\nDone."),
    ]


def test_chatgpt_code_the_assistant_showed_is_a_fence(tmp_path):
    conv = chatgpt_conversation("g1", "t", [("user", "code?"), ("assistant", "x")])
    conv["mapping"]["g1-n1"]["message"]["content"] = {
        "content_type": "code",
        "language": "python",
        "text": "print(1)",
    }
    (c,) = read_export("chatgpt", [write_json(tmp_path / "c.json", [conv])])
    assert c.messages[1].text == "```python\nprint(1)\n```"


def test_chatgpt_message_without_parts_is_an_error(tmp_path):
    conv = chatgpt_conversation("g1", "t", [("user", "Q1"), ("assistant", "A1")])
    del conv["mapping"]["g1-n1"]["message"]["content"]["parts"]
    with pytest.raises(InvalidExport, match=r"c\.json \[0\]\.mapping\['g1-n1'\]: .*'parts'"):
        read_export("chatgpt", [write_json(tmp_path / "c.json", [conv])])


def test_chatgpt_without_mapping_is_an_error(tmp_path):
    conv = chatgpt_conversation("g1", "t", [("user", "Q1")])
    conv["mapping"] = []
    with pytest.raises(InvalidExport, match="'mapping' must be an object"):
        read_export("chatgpt", [write_json(tmp_path / "c.json", [conv])])


# --- JSON lines --------------------------------------------------------------------------


def test_jsonl_accepts_each_documented_field_name(tmp_path):
    lines = [
        {"role": "user", "content": "one", "timestamp": "2026-11-30T09:00:00Z"},
        {"sender": "assistant", "text": "two", "created_at": 1795000000},
        {"author": {"role": "human"}, "message": "three", "timestamp": 1795000060000},
        {"role": "assistant", "content": [{"type": "text", "text": "four"}, {"type": "x"}]},
        {"role": "system", "content": "left out"},
        {"event": "session start"},
    ]
    (c,) = read_export("jsonl", [write_jsonl(tmp_path / "chat-1.jsonl", lines)])
    assert c.key == "jsonl:chat-1" and c.title == ""
    assert [(m.role, m.text, m.created) for m in c.messages] == [
        ("user", "one", "2026-11-30T09:00:00Z"),
        ("assistant", "two", "2026-11-18T11:06:40Z"),
        ("user", "three", "2026-11-18T11:07:40Z"),
        ("assistant", "four", None),
    ]
    assert (c.created, c.updated) == ("2026-11-18T11:06:40Z", "2026-11-30T09:00:00Z")


def test_jsonl_splits_conversations_by_id(tmp_path):
    lines = [
        {"conversation_id": "a", "role": "user", "content": "a1"},
        {"session_id": "b", "role": "user", "content": "b1"},
        {"conversation_id": "a", "role": "assistant", "content": "a2"},
    ]
    found = read_export("jsonl", [write_jsonl(tmp_path / "log.jsonl", lines)])
    assert [(c.key, [m.text for m in c.messages]) for c in found] == [
        ("jsonl:a", ["a1", "a2"]),
        ("jsonl:b", ["b1"]),
    ]


def test_jsonl_reads_claude_code_transcripts(tmp_path):
    session = "95e6f011-ec33-4b37-91ad-5d242b40ae3d"
    lines = [
        {"type": "queue-operation", "operation": "dequeue", "sessionId": session},
        {
            "type": "user",
            "message": {"role": "user", "content": "Fix the login bug"},
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": session,
            "timestamp": "2026-01-20T11:57:17.716Z",
        },
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [
                    {"type": "thinking", "thinking": "..."},
                    {"type": "text", "text": "Found it."},
                    {"type": "tool_use", "name": "Edit", "input": {}},
                ],
            },
            "sessionId": session,
            "timestamp": "2026-01-20T11:58:00Z",
        },
        {
            "type": "user",
            "message": {"role": "user", "content": [{"type": "tool_result", "content": "ok"}]},
            "sessionId": session,
        },
    ]
    (c,) = read_export("jsonl", [write_jsonl(tmp_path / f"{session}.jsonl", lines)])
    assert c.key == f"jsonl:{session}"
    assert [(m.role, m.text) for m in c.messages] == [
        ("user", "Fix the login bug"),
        ("assistant", "Found it."),
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('{"role": "user"}', "line 2: the message has no text"),
        ('{"content": "hi"}', "line 2: the message has no speaker"),
        ('{"role": "user", "content": 5}', "line 2: the message's text must be"),
        ("[1, 2]", "line 2: a line must be a JSON object"),
        ('{"role": "user", "content": "x"', "line 2, column "),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path, line, expected):
    path = tmp_path / "log.jsonl"
    path.write_text('{"role": "user", "content": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InvalidExport) as err:
        read_export("jsonl", [path])
    assert err.value.message.startswith("log.jsonl: ") and expected in err.value.message


def test_unknown_format_is_an_error(tmp_path):
    with pytest.raises(InvalidExport, match="use one of claude, chatgpt, jsonl"):
        read_export("gemini", [tmp_path / "x.json"])


# --- message hashes ----------------------------------------------------------------------


def test_message_hashes_tell_repeated_words_apart_and_stay_when_a_chat_grows():
    a = Message("user", "yes", None)
    b = Message("assistant", "ok", "2026-11-30T09:00:00Z")
    first = message_hashes([a, b, a])
    assert len(set(first)) == 3 and all(len(h) == 12 for h in first)
    assert message_hashes([a, b, a, b])[:3] == first
    # Times do not count (exports rewrite them); the speaker and the words do.
    assert message_hashes([Message("assistant", "ok", None)])[0] == first[1]
    assert message_hashes([Message("user", "ok", None)])[0] != first[1]
