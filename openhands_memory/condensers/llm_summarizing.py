"""LLMSummarizing: a rolling summary of the forgotten middle, written by a model.

The head (``keep_first`` events) and the newest events stay; the events between them and
the previous summary, in full, are summarized into one new summary that takes their place.
Without ``llm_config`` the offline summarizer writes it (no API key needed).
"""

from __future__ import annotations

from ..events import Event
from ..llm import LLMReply, complete
from ..settings import settings
from ..strategy import ModelCalls
from .llm_base import SummarizingCondenser, longest
from ..view.rendering import render

INSTRUCTIONS = """\
You keep the working memory of a software agent whose conversation has grown too long.
Some of its oldest steps are about to be removed from its context. Write the note it will
read instead of them, so that it can carry on as if it still remembered them.

The note must keep:
- what the user asked for, with every constraint and clarification, in their own terms;
- what has been done: files read, created and changed (with paths), commands run and their
  outcomes, tests and whether they passed;
- what went wrong and what was learned from it (errors, dead ends, fixes that worked);
- decisions made and why; the current plan and the open tasks, in order;
- exact identifiers the agent will need again: paths, function names, URLs, branch names,
  values, versions.

A previous note, if there is one, covers even older steps: fold it in, keep everything in it
that still matters, and never drop a user requirement. Be specific and terse; leave out
pleasantries and anything the agent cannot use. Answer with the note only."""


def prompt_messages(events: list[Event], previous: str | None, max_event_length: int) -> list[dict]:
    parts = []
    if previous:
        parts.append(f"<previous_note>\n{previous}\n</previous_note>")
    parts.append(f"<steps_to_forget>\n{render(events, max_event_length)}\n</steps_to_forget>")
    parts.append("Write the new note.")
    return [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


@settings()
class LLMSummarizingCondenser(SummarizingCondenser):
    type = "llm"

    def summarize_with_model(self, events: list[Event], previous: str | None, calls: ModelCalls) -> str:
        config = self.llm_config
        assert config is not None
        return self.ask(
            calls,
            lambda limit: complete(config, prompt_messages(events, previous, limit)),
            summary_text,
            longest(events),
        )


def summary_text(reply: LLMReply) -> str:
    text = (reply.text or "").strip()
    if not text:
        raise ValueError("the reply has no text")
    return text
