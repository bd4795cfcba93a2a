"""StructuredSummary: the model fills in a state-summary function with 18 fields.

A reply without the function call, or with arguments that do not parse, is recorded in the
ledger as ``bad_response`` and falls back to the reply's text or, without one, to the
offline summarizer: a usable summary, never a crash.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, fields, replace

from ..events import Event
from ..llm import LLMReply, complete
from ..settings import settings
from ..strategy import ModelCalls
from .llm_base import SummarizingCondenser, longest
from .llm_summarizing import prompt_messages

log = logging.getLogger(__name__)

FUNCTION = "create_state_summary"


@dataclass(frozen=True)
class StateSummary:
    user_context: str = ""
    completed_tasks: str = ""
    pending_tasks: str = ""
    current_state: str = ""
    files_modified: str = ""
    function_changes: str = ""
    data_structures: str = ""
    tests_written: str = ""
    tests_passing: str = ""
    failing_tests: str = ""
    error_messages: str = ""
    branch_created: str = ""
    branch_name: str = ""
    commits_made: str = ""
    pr_created: str = ""
    pr_status: str = ""
    dependencies: str = ""
    other_relevant_context: str = ""

    def render(self) -> str:
        sections = [
            ("Task", ["user_context", "completed_tasks", "pending_tasks", "current_state"]),
            ("Code", ["files_modified", "function_changes", "data_structures", "dependencies"]),
            ("Tests", ["tests_written", "tests_passing", "failing_tests", "error_messages"]),
            ("Version control", ["branch_created", "branch_name", "commits_made", "pr_created", "pr_status"]),
            ("Other", ["other_relevant_context"]),
        ]
        out = ["# State summary"]
        for title, names in sections:
            lines = [f"- {n.replace('_', ' ')}: {getattr(self, n)}" for n in names if getattr(self, n)]
            if lines:
                out += [f"## {title}", *lines]
        return "\n".join(out)


DESCRIPTIONS = {
    "user_context": "What the user wants: goals, requirements, constraints and clarifications.",
    "completed_tasks": "Tasks finished so far, each with its result.",
    "pending_tasks": "Tasks still to do, in the order they should be done.",
    "current_state": "Where the work stands now: relevant variables, state, the last step taken.",
    "files_modified": "Files created or changed, with paths.",
    "function_changes": "Functions or classes added or changed, with their files.",
    "data_structures": "Important data structures in use or changed.",
    "tests_written": "Have tests been written for the change? true, false or unknown.",
    "tests_passing": "Do all tests pass now? true, false or unknown.",
    "failing_tests": "Names or descriptions of failing tests.",
    "error_messages": "Key error messages met, verbatim where short.",
    "branch_created": "Has a branch been created for this work? true, false or unknown.",
    "branch_name": "The working branch, if known.",
    "commits_made": "Have commits been made? true, false or unknown.",
    "pr_created": "Has a pull request been opened? true, false or unknown.",
    "pr_status": "State of the pull request: draft, open, merged, closed or unknown.",
    "dependencies": "Dependencies or imports added or changed.",
    "other_relevant_context": "Anything else the agent will need that fits no field above.",
}

TOOL = {
    "type": "function",
    "function": {
        "name": FUNCTION,
        "description": "Record the state of the work so the agent can continue after its oldest steps are removed from context. user_context, completed_tasks and pending_tasks must not be empty.",
        "parameters": {
            "type": "object",
            "properties": {f.name: {"type": "string", "description": DESCRIPTIONS[f.name]} for f in fields(StateSummary)},
            "required": ["user_context", "completed_tasks", "pending_tasks"],
        },
    },
}


def parse_state(reply: LLMReply) -> StateSummary:
    """The StateSummary in the reply's function call; ValueError says what is wrong."""
    call = next((c for c in reply.tool_calls if c.name == FUNCTION), None)
    if call is None:
        raise ValueError(f"the reply has no {FUNCTION} call")
    try:
        args = call.parsed_arguments()
    except ValueError as e:
        raise ValueError(f"the {FUNCTION} arguments are not JSON: {e}") from None
    if not isinstance(args, dict):
        raise ValueError(f"the {FUNCTION} arguments are not an object")
    known = {f.name for f in fields(StateSummary)}
    return StateSummary(**{k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items() if k in known})


@settings()
class StructuredSummaryCondenser(SummarizingCondenser):
    type = "structured"

    purpose = "structured_summary"

    def summarize_with_model(self, events: list[Event], previous: str | None, calls: ModelCalls) -> str:
        config = self.llm_config
        assert config is not None
        reply = self.ask(
            calls,
            lambda limit: complete(
                config,
                prompt_messages(events, previous, limit),
                tools=[TOOL],
                tool_choice={"type": "function", "function": {"name": FUNCTION}},
            ),
            lambda r: r,
            longest(events),
        )
        try:
            return parse_state(reply).render()
        except ValueError as e:
            # The call went through but its shape is wrong: record that, and still summarize.
            text = (reply.text or "").strip()
            if not reply.cached:  # a kept reply was no call: the ledger has it already
                entry = calls.calls[-1]  # ``ask`` recorded this reply's call last
                calls.calls[-1] = replace(
                    entry, call=replace(entry.call, outcome="bad_response", error=str(e)), produced=bool(text)
                )
            log.warning("%s: %s; using %s instead", self.type, e, "its text" if text else "the offline summary")
            return text or self.summarize_offline(events, previous)
