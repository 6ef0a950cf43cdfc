"""Two MCP prompts: ready-made requests a person picks from a client's prompt menu.

- `notes_about` (topic): "what do my notes say about X", with the best matching notes
  already in the prompt (memory_search's reply on a token budget), so the model answers from
  them at once and reads one in full only when it needs to.
- `save_decisions` (topic?, folder?): "save what we decided in this conversation as a
  note", the steps spelled out: look for an existing note first, append there or save anew.
  Not offered on a read-only vault.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from mcp_types import (
    GetPromptResult,
    ListPromptsResult,
    Prompt,
    PromptArgument,
    PromptMessage,
    TextContent,
)

from vault_brain.config import Settings
from vault_brain.contract import QUERY_MAX, REF_MAX
from vault_brain.errors import Forbidden, InvalidInput
from vault_brain.server import tools

if TYPE_CHECKING:
    from vault_brain.service import Brain

CONTEXT_TOKENS = 1500  # the notes_about prompt's search reply, at most

NOTES_ABOUT = Prompt(
    name="notes_about",
    title="What do my notes say about…",
    description="Answer from your notes on a topic; the best matching notes come with it.",
    arguments=[PromptArgument(name="topic", description="what to look up", required=True)],
)
SAVE_DECISIONS = Prompt(
    name="save_decisions",
    title="Save what we decided as a note",
    description="Write this conversation's decisions into a note (or add them to one).",
    arguments=[
        PromptArgument(name="topic", description="what the decisions were about"),
        PromptArgument(name="folder", description="where a new note goes"),
    ],
)


def list_prompts(settings: Settings) -> ListPromptsResult:
    if settings.write.read_only:
        return ListPromptsResult(prompts=[NOTES_ABOUT])
    return ListPromptsResult(prompts=[NOTES_ABOUT, SAVE_DECISIONS])


def get_prompt(
    settings: Settings,
    brain: Callable[[], Brain],
    name: str,
    arguments: dict[str, str] | None,
) -> GetPromptResult:
    """The prompt's messages; `brain()` opens the Brain only for a prompt that reads notes."""
    args = {k: v.strip() for k, v in (arguments or {}).items() if isinstance(v, str)}
    if name == NOTES_ABOUT.name:
        return _notes_about(brain(), _arg(args, "topic", QUERY_MAX, required=True))
    if name == SAVE_DECISIONS.name:
        if settings.write.read_only:
            raise Forbidden("this vault is served read-only: nothing can be saved to it")
        return _save_decisions(_arg(args, "topic", QUERY_MAX), _arg(args, "folder", REF_MAX))
    known = ", ".join(p.name for p in list_prompts(settings).prompts)
    raise InvalidInput(f"no prompt {name[:80]!r}; prompts: {known}")


def _arg(args: dict[str, str], key: str, cap: int, *, required: bool = False) -> str:
    value = args.get(key, "")
    if required and not value:
        raise InvalidInput(f"{key} is required")
    if len(value) > cap:
        raise InvalidInput(f"{key} is too long ({len(value)} chars; max {cap})")
    return value


def _notes_about(brain: Brain, topic: str) -> GetPromptResult:
    spec = tools.BY_NAME["memory_search"]
    reply, _ = spec.run(brain, {"query": topic, "max_tokens": CONTEXT_TOKENS})
    text = (
        f"What do my notes say about {topic}?\n\n"
        "Answer from my notes below (memory_search's reply, best match first). Name the "
        "notes you draw on by title. When a snippet is not enough, read the note in full "
        "with memory_get and its id. If they do not cover it, say so plainly instead of "
        "answering from general knowledge.\n\n" + tools.dumps(reply)
    )
    return _user(f"Notes about {topic}", text)


def _save_decisions(topic: str, folder: str) -> GetPromptResult:
    about = f" about {topic}" if topic else ""
    where = f' in the folder "{folder}"' if folder else ""
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    text = (
        f"Save what we decided in this conversation{about} as a note in my vault.\n\n"
        "1. Write down each decision with its reason, and any open question or next step "
        "with who owns it. Leave out the discussion that led nowhere.\n"
        "2. Look for a note this belongs in: memory_search with a few words of the topic. "
        "If one fits, memory_get it and add a section with memory_update (append), headed "
        f'"## Decisions {today}".\n'
        f"3. Otherwise create one with memory_save{where}: a clear title, a one-line "
        "summary, and a few tags.\n"
        "4. Tell me the title and path of the note you wrote, and what you put in it."
    )
    return _user("Save this conversation's decisions", text)


def _user(description: str, text: str) -> GetPromptResult:
    return GetPromptResult(
        description=description,
        messages=[PromptMessage(role="user", content=TextContent(text=text))],
    )
