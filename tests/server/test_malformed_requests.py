"""Every malformed request gets an answer: a JSON-RPC error (with the request's id when it
can be read) for what the protocol layer cannot take, INVALID_INPUT for arguments out of
range. A request that gets no reply leaves a client waiting forever."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from tests.waiting import HANG_SECONDS

from .harness import INITIALIZE, TOKEN, RawSession, write_vault

PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("malformed")
    session = RawSession(write_vault(tmp / "vault"), tmp / "stderr.log")
    session.send(INITIALIZE)
    session.receive()
    session.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield session
    session.finish()


def call_line(id_: int, name: str, arguments: str) -> bytes:
    return (
        f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call",'
        f'"params":{{"name":"{name}","arguments":{arguments}}}}}'
    ).encode()


def still_answers(raw: RawSession) -> bool:
    reply = raw.request(900, "tools/list")
    return reply["id"] == 900 and len(reply["result"]["tools"]) == 6


def test_a_lone_surrogate_in_an_argument_gets_an_error_with_the_request_id(raw):
    raw.send_raw(call_line(2, "memory_search", r'{"query":"\ud800"}'))
    reply = raw.receive()
    assert reply["id"] == 2 and reply["error"]["code"] == INVALID_PARAMS
    assert "Unicode" in reply["error"]["message"]
    assert still_answers(raw)


def test_a_lone_low_surrogate_in_an_id_argument_is_answered(raw):
    raw.send_raw(call_line(3, "memory_get", r'{"id":"Inbox\udfff.md"}'))
    reply = raw.receive()
    assert reply["id"] == 3 and reply["error"]["code"] == INVALID_PARAMS


def test_a_surrogate_pair_is_a_character_and_works(raw):
    raw.send_raw(call_line(4, "memory_search", r'{"query":"lighthouse \ud83d\ude00"}'))
    reply = raw.receive()
    assert reply["id"] == 4 and reply["result"]["isError"] is False


def test_a_lone_surrogate_in_the_id_itself_gets_an_error_without_an_id(raw):
    raw.send_raw(rb'{"jsonrpc":"2.0","id":"\ud800","method":"tools/list","params":{}}')
    reply = raw.receive()
    assert reply["id"] is None and reply["error"]["code"] == INVALID_PARAMS
    assert still_answers(raw)


def test_bytes_that_are_not_utf8_get_a_parse_error(raw):
    raw.send_raw(b'\xff\xfe{"jsonrpc":"2.0","id":5,"method":"tools/list"}')
    reply = raw.receive()
    assert reply["id"] is None and reply["error"]["code"] == PARSE_ERROR
    assert still_answers(raw)


def test_a_line_that_is_not_json_gets_a_parse_error(raw):
    raw.send_raw(b"hello, is anyone there?")
    reply = raw.receive()
    assert reply["id"] is None and reply["error"]["code"] == PARSE_ERROR


def test_json_that_is_not_a_json_rpc_message_gets_invalid_request(raw):
    raw.send_raw(b'{"jsonrpc":"2.0","id":6}')
    reply = raw.receive()
    assert reply["id"] == 6 and reply["error"]["code"] == INVALID_REQUEST
    raw.send_raw(b"[1, 2, 3]")
    reply = raw.receive()
    assert reply["id"] is None and reply["error"]["code"] == INVALID_REQUEST


def test_a_number_too_long_to_parse_gets_an_error_with_the_request_id(raw):
    raw.send_raw(call_line(7, "memory_list", '{"limit":' + "1" * 5000 + "}"))
    reply = raw.receive()
    assert reply["id"] == 7 and reply["error"]["code"] == INVALID_PARAMS


def test_a_malformed_notification_gets_no_reply_and_breaks_nothing(raw):
    # JSON-RPC never answers a notification, not even with an error.
    raw.send_raw(rb'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"x":"\ud800"}}')
    assert still_answers(raw)


def tool_error(raw: RawSession, id_: int, name: str, arguments: dict) -> dict:
    reply = raw.request(id_, "tools/call", {"name": name, "arguments": arguments})
    assert reply["result"]["isError"] is True, reply
    return json.loads(reply["result"]["content"][0]["text"])


def cursor(payload: str) -> str:
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "payload", ['["2024-01-01", 1' + "0" * 30 + "]", '["2024-01-01", Infinity]', '["x", NaN]']
)
def test_a_cursor_with_an_impossible_position_is_invalid_input(raw, payload):
    error = tool_error(raw, 10, "memory_list", {"cursor": cursor(payload)})
    assert error["code"] == "INVALID_INPUT" and "cursor" in error["message"]


def test_a_4301_digit_limit_in_a_string_is_invalid_input(raw):
    error = tool_error(raw, 11, "memory_list", {"limit": "1" * 4301})
    assert error["code"] == "INVALID_INPUT" and "limit" in error["message"]


def test_a_huge_max_chars_is_invalid_input(raw):
    error = tool_error(raw, 12, "memory_get", {"id": "Inbox.md", "max_chars": 10**30})
    assert error["code"] == "INVALID_INPUT" and "max_chars" in error["message"]


def test_the_server_kept_no_internal_errors(raw):
    assert '"tool_internal_error"' not in raw.stderr()


@pytest.mark.parametrize(
    "body",
    [
        call_line(2, "memory_search", r'{"query":"\ud800"}'),
        b'\xff\xfe{"jsonrpc":"2.0"}',
        call_line(3, "memory_list", '{"limit":' + "1" * 5000 + "}"),
    ],
    ids=["lone-surrogate", "not-utf8", "long-number"],
)
def test_over_http_a_malformed_body_gets_a_json_rpc_error(http_server, body):
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKEN}",
    }
    response = httpx.post(
        http_server.url + "/mcp", content=body, headers=headers, timeout=HANG_SECONDS
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == PARSE_ERROR
