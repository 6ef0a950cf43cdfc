"""What a note holds can never stall the server (issue 25, item 10): a frontmatter whose
aliases multiply is read as text, an update of it is refused with a clear INVALID_INPUT,
and every other call keeps being answered."""

from __future__ import annotations

import json

from .harness import stdio_client_for, write_vault

BOMB = (
    "---\ntitle: Bomb\n"
    + "l0: &l0 ["
    + ", ".join(["x"] * 10)
    + "]\n"
    + "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 10))
    + "tags: *l9\n---\n# Bomb\n\nQuartzlantern keeps its body searchable.\n"
)


def test_an_update_of_a_note_whose_aliases_multiply_is_refused_and_the_server_serves_on(
    tmp_path,
):
    vault = write_vault(tmp_path / "vault")
    (vault / "Bomb.md").write_text(BOMB, encoding="utf-8")
    mcp = stdio_client_for(vault, tmp_path)
    try:
        mcp.wait_indexed()
        note = mcp.ok("memory_get", {"id": "Bomb.md"})
        assert "Quartzlantern" in note["content"]
        # A hang guard only (the call used to take minutes): generous, never a measure.
        result = mcp.portal.call(
            lambda: mcp.session.call_tool(
                "memory_update",
                {"id": "Bomb.md", "version": note["version"], "append": "more"},
                read_timeout_seconds=120,
            )
        )
        assert result.is_error
        error = json.loads(result.content[0].text)
        assert error["code"] == "INVALID_INPUT" and "alias" in error["message"], error
        hits = mcp.ok("memory_search", {"query": "quartzlantern"})["results"]
        assert [h["path"] for h in hits] == ["Bomb.md"]
        assert (vault / "Bomb.md").read_text(encoding="utf-8") == BOMB  # untouched
    finally:
        mcp.close()
