"""Conformance cases: SDK-shaped histories, generated and hand-made, as JSON event lists.

* ``generated``: a seeded simulation of an OpenHands agent (the emission order of
  ``agent/response_dispatch.py``): parallel batches with the thought on the first action,
  thinking blocks and reasoning, invalid calls answered at once by an AgentErrorEvent,
  rejections, every OpenHands tool's observations (errors, images, outputs over 60,000
  characters, saved-output notices), consecutive user messages, condensation requests and
  condensations made the way the SDK's LLMSummarizingCondenser cuts (including hard resets).
* ``edited``: copies of those with one edit each (an observation dropped, part of a parallel
  batch dropped, cut at a random point, a trailing request, a duplicated result, a thinking
  action dropped, a user message moved between a batch and its results).
* ``hand-made``: small cases for one behaviour each, among them the documented differences.
* ``branched`` (``tree/``, ``tree-hand/``): histories that are trees, written as the SDK writes
  them when its agent is rewound (``navigate_to``): every event names its parent, HEAD moves
  back to an observation, a user message, an action in the middle of its batch, a
  Condensation, another branch's event, or nowhere (a new root), the agent goes on from there
  and condenses, the SDK's way, the branch it is on; state updates are children of HEAD that
  never become HEAD.

A case is ``{"id", "events", "configs", "condense"?, "difference"?}``; ``difference`` names a
documented difference (docs/architecture.md) the test asserts instead of equality. A branched
case adds ``navigations`` (``[index of the next event, uid or None]``: where HEAD was moved),
``leaf`` (HEAD's uid; None with ``head_is_empty``), ``other_leaves`` (events off HEAD's path
whose views are compared too) and ``rewinds`` (what each navigation went to).
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any, Callable

from openhands_memory.events import event_from_dict
from openhands_memory.view import View

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
JPEG = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQH/wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACv/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8AfwD/2Q=="

# The LLM configurations every case's messages are formatted for (keyword arguments of the
# SDK's LLM); the SDK reports which switches each resolves to.
CONFIGS: dict[str, dict[str, Any]] = {
    "claude": {"model": "anthropic/claude-sonnet-4-5-20250929"},  # vision, cache markers
    "gpt-no-vision": {"model": "openai/gpt-4o", "disable_vision": True},
    "kimi-thinking": {"model": "moonshot/kimi-k2-thinking"},  # sends reasoning_content
    "glm-string": {"model": "openrouter/z-ai/glm-4.6"},  # string content
}


def text(t: str) -> dict[str, Any]:
    return {"cache_prompt": False, "type": "text", "text": t}


def image(url: str) -> dict[str, Any]:
    return {"cache_prompt": False, "type": "image", "image_urls": [url]}


class Builder:
    """Appends SDK-shaped event dicts with deterministic ids and timestamps."""

    def __init__(self, rng: random.Random, save_dir: str):
        self.rng = rng
        self.save_dir = save_dir
        self.events: list[dict[str, Any]] = []
        self.n_resp = 0
        self.n_call = 0

    def active(self) -> list[dict[str, Any]]:
        """The events the agent's view is built from: all of them in a linear history."""
        return self.events

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def add(self, kind: str, source: str, **fields: Any) -> dict[str, Any]:
        e = {"id": self.uid(), "timestamp": f"2026-01-01T00:{len(self.events) // 60:02d}:{len(self.events) % 60:02d}.000000",
             "source": source, **fields, "kind": kind}
        self.events.append(e)
        return e

    def system(self, dynamic: bool = False) -> None:
        fields: dict[str, Any] = {"system_prompt": text("You are OpenHands agent, a helpful coding assistant."), "tools": []}
        if dynamic:
            fields["dynamic_context"] = text("Working directory: /workspace. Today is 2026-01-01.")
        self.add("SystemPromptEvent", "agent", **fields)

    def user(self, t: str, *, with_image: bool = False) -> None:
        content = [text(t)] + ([image(f"data:image/png;base64,{PNG}")] if with_image else [])
        self.add("MessageEvent", "user", llm_message={"role": "user", "content": content, "thinking_blocks": []},
                 activated_skills=[], extended_content=[])

    def agent_message(self, t: str, *, thinking: bool = False, reasoning: str | None = None) -> None:
        self.n_resp += 1
        msg: dict[str, Any] = {"role": "assistant", "content": [text(t)] if t else [], "thinking_blocks": []}
        if thinking:
            msg["thinking_blocks"] = [{"type": "thinking", "thinking": "Wrap up.", "signature": "c2ln"}]
        if reasoning:
            msg["reasoning_content"] = reasoning
        self.add("MessageEvent", "agent", llm_message=msg, llm_response_id=f"chatcmpl-{self.n_resp}",
                 activated_skills=[], extended_content=[])

    def request(self) -> None:
        self.add("CondensationRequest", "environment")

    def condensation(self, forgotten: list[str], summary: str | None, offset: int | None) -> None:
        fields: dict[str, Any] = {"forgotten_event_ids": forgotten, "llm_response_id": f"summ-{len(self.events)}"}
        if summary is not None:
            fields["summary"] = summary
        if offset is not None:
            fields["summary_offset"] = offset
        self.add("Condensation", "environment", **fields)


# --- tools: (tool name, arguments, action, observation) ----------------------------------------


def _terminal(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    rng = b.rng
    cmd = rng.choice(["ls -la", "pytest -q", "git status", "python run.py", "cat setup.cfg"])
    out = rng.choice(["ok\n", "3 passed in 0.12s\n", "fatal: not a git repository\n", "", "line\n" * 5])
    if big:
        out = "".join(f"{i:06d} building wheel for package {i % 97}\n" for i in range(2200))  # > 60,000
    code = rng.choice([0, 0, 1, 2, -1]) if not error else 1
    meta: dict[str, Any] = {"exit_code": code, "pid": rng.choice([-1, 4242]), "prefix": "", "suffix": ""}
    if rng.random() < 0.8:
        meta["working_dir"] = "/workspace/project"
    if rng.random() < 0.4:
        meta["py_interpreter_path"] = "/usr/bin/python3"
    if code == -1:
        meta["suffix"] = "\n[The command has no new output after 30 seconds. You may wait longer to see additional output by sending empty command '', send other commands to interact with the current process, send keys to interrupt/kill the command, or use the timeout parameter in terminal for future commands.]"
    if rng.random() < 0.15:
        meta["prefix"] = "[Below is the output of the previous command.]\n"
    obs: dict[str, Any] = {"content": [text(out)], "is_error": error, "command": cmd,
                           "exit_code": None if code == -1 else code, "timeout": code == -1, "metadata": meta,
                           "kind": "TerminalObservation"}
    if big and rng.random() < 0.5:
        obs["full_output_save_dir"] = b.save_dir
    args = {"command": cmd}
    return "terminal", args, {"command": cmd, "is_input": False, "reset": False, "kind": "TerminalAction"}, obs


def _file_editor(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    rng = b.rng
    command = rng.choice(["view", "str_replace", "create"])
    path = rng.choice(["/workspace/project/app.py", "/workspace/project/README.md"])
    if error:
        out = f"Invalid `path` parameter: {path}. The path {path} does not exist."
    elif command == "view":
        lines = 3000 if big else 6
        out = f"Here's the result of running `cat -n` on {path}:\n" + "".join(f"{i:6d}\tprint({i})\n" for i in range(1, lines))
    else:
        out = f"The file {path} has been edited. Here's the result of running `cat -n` on a snippet:\n     1\tx = 2\nReview the changes."
    obs = {"content": [text(out)], "is_error": error, "command": command, "path": path, "prev_exist": True, "kind": "FileEditorObservation"}
    if command == "str_replace" and not error:
        obs.update(old_content="x = 1\n", new_content="x = 2\n")
    args = {"command": command, "path": path}
    return "file_editor", args, {**args, "kind": "FileEditorAction"}, obs


def _task_tracker(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    tasks = [{"title": "Reproduce the bug", "notes": "", "status": "done"}, {"title": "Fix it", "notes": "", "status": "in_progress"}]
    out = "Task list has been updated with 2 item(s)." if not error else "Invalid task list."
    obs = {"content": [text(out)], "is_error": error, "command": "plan", "task_list": tasks, "kind": "TaskTrackerObservation"}
    return "task_tracker", {"command": "plan", "task_list": tasks}, {"command": "plan", "task_list": tasks, "kind": "TaskTrackerAction"}, obs


def _browser(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    rng = b.rng
    url = rng.choice(["https://docs.python.org/3/", "https://example.org/page"])
    page = f"# Page at {url}\n" + ("lorem ipsum dolor sit amet " * (2600 if big else 3))
    obs: dict[str, Any] = {"content": [text(page if not error else "Navigation failed: timeout")], "is_error": error,
                           "kind": "BrowserObservation"}
    if rng.random() < 0.6:
        obs["screenshot_data"] = rng.choice([PNG, JPEG])
    if rng.random() < 0.5:
        obs["full_output_save_dir"] = b.save_dir
    return "browser_navigate", {"url": url}, {"url": url, "new_tab": False, "kind": "BrowserNavigateAction"}, obs


def _glob(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    files = [f"/workspace/project/src/m{i}.py" for i in range(4)]
    out = "Found 4 file(s) matching pattern '**/*.py' in '/workspace/project':\n" + "\n".join(files)
    obs = {"content": [text(out)], "is_error": error, "files": files, "pattern": "**/*.py", "search_path": "/workspace/project",
           "truncated": False, "kind": "GlobObservation"}
    return "glob", {"pattern": "**/*.py"}, {"pattern": "**/*.py", "kind": "GlobAction"}, obs


def _grep(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    matches = ["/workspace/project/src/m1.py"]
    out = "Found 1 file(s) containing pattern 'def parse' in '/workspace/project':\n" + "\n".join(matches)
    obs = {"content": [text(out)], "is_error": error, "matches": matches, "pattern": "def parse", "search_path": "/workspace/project",
           "truncated": False, "kind": "GrepObservation"}
    return "grep", {"pattern": "def parse"}, {"pattern": "def parse", "kind": "GrepAction"}, obs


def _think(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    thought = "The parser drops the timezone; check the date helper first."
    obs = {"content": [text("Your thought has been logged.")], "is_error": False, "kind": "ThinkObservation"}
    return "think", {"thought": thought}, {"thought": thought, "kind": "ThinkAction"}, obs


def _finish(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    message = "The date test passes now."
    obs = {"content": [text(message)], "is_error": False, "kind": "FinishObservation"}
    return "finish", {"message": message}, {"message": message, "kind": "FinishAction"}, obs


def _apply_patch(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    patch = "*** Begin Patch\n*** Update File: app.py\n@@\n-x = 1\n+x = 2\n*** End Patch"
    out = "Done!" if not error else "Invalid patch: missing *** End Patch"
    obs = {"content": [text(out)], "is_error": error, "message": out, "fuzz": 0, "kind": "ApplyPatchObservation"}
    return "apply_patch", {"patch": patch}, {"patch": patch, "kind": "ApplyPatchAction"}, obs


def _mcp(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    content = [text("[Tool 'fetch' executed.]"), text("<html>hello</html>" if not error else "HTTP 500")]
    if b.rng.random() < 0.4:
        content.append(image(f"data:image/png;base64,{PNG}"))
    obs = {"content": content, "is_error": error, "tool_name": "fetch", "kind": "MCPToolObservation"}
    return "fetch", {"url": "https://example.org"}, {"data": {"url": "https://example.org"}, "kind": "MCPToolAction"}, obs


def _task(b: Builder, big: bool, error: bool) -> tuple[str, dict, dict | None, dict]:
    obs = {"content": [text("Found the bug in src/dates.py:41.")], "is_error": error, "task_id": "task-1", "subagent": "explore",
           "status": "completed" if not error else "failed", "kind": "TaskObservation"}
    args = {"prompt": "Find the date bug", "subagent_type": "explore"}
    return "task", args, None, obs


TOOLS: list[Callable[[Builder, bool, bool], tuple[str, dict, dict | None, dict]]] = [
    _terminal, _terminal, _terminal, _file_editor, _file_editor, _task_tracker, _browser, _glob, _grep, _think,
    _finish, _apply_patch, _mcp, _task,
]


def batch(b: Builder, n: int, *, thinking: bool, p_invalid: float = 0.08, p_reject: float = 0.05,
          p_big: float = 0.04, p_error: float = 0.1, answer: bool = True) -> None:
    """One model response with ``n`` tool calls, emitted as the SDK's agent emits it."""
    rng = b.rng
    b.n_resp += 1
    resp = f"chatcmpl-{b.n_resp}"
    pending: list[tuple[dict, dict]] = []
    for k in range(n):
        b.n_call += 1
        call_id = f"toolu_{b.n_call:04d}"
        tool, args, action, obs = rng.choice(TOOLS)(b, rng.random() < p_big, rng.random() < p_error)
        first = k == 0
        fields: dict[str, Any] = {
            "thought": [text(rng.choice(["Let me look.", "Running the tests.", "", " "]))] if first and rng.random() < 0.7 else [],
            "thinking_blocks": [{"type": "thinking", "thinking": f"step {b.n_resp}", "signature": "c2ln"}] if first and thinking else [],
            "tool_name": tool, "tool_call_id": call_id,
            "tool_call": {"id": call_id, "name": tool, "arguments": json.dumps(args), "origin": "completion"},
            "llm_response_id": resp, "security_risk": "UNKNOWN",
        }
        if first and rng.random() < 0.3:
            fields["reasoning_content"] = "I should check the failing test first."
        invalid = rng.random() < p_invalid
        if action is not None and not invalid:
            fields["action"] = action
        a = b.add("ActionEvent", "agent", **fields)
        if invalid:
            b.add("AgentErrorEvent", "agent", tool_name=tool, tool_call_id=call_id,
                  error=f"Error validating args {json.dumps(args)} for tool '{tool}': missing field",
                  classification={"kind": "agent_action", "retryable": False, "user_action": "none"})
        else:
            pending.append((a, obs))
    if not answer:
        return
    for a, obs in pending:
        if rng.random() < p_reject:
            b.add("UserRejectObservation", "environment", tool_name=a["tool_name"], tool_call_id=a["tool_call_id"],
                  rejection_reason=rng.choice(["User rejected the action", "Blocked by hook: rm -rf"]),
                  rejection_source=rng.choice(["user", "hook"]), action_id=a["id"])
        else:
            b.add("ObservationEvent", "environment", tool_name=a["tool_name"], tool_call_id=a["tool_call_id"],
                  observation=obs, action_id=a["id"], extended_content=[])


# --- condensing as the SDK's LLMSummarizingCondenser cuts --------------------------------------


def _view(events: list[dict[str, Any]]) -> View:
    return View.from_events([event_from_dict(e) for e in events])


def condense_like_sdk(b: Builder, keep_first: int, max_size: int, *, request: bool, reset: bool = False) -> bool:
    """Append the Condensation the SDK's condenser would write (summary text aside), cut on the
    view of the active branch (the whole log for a linear history)."""
    view = _view(b.active())
    evs = view.events
    sys_at = next((i for i, e in enumerate(evs) if e.kind == "SystemPromptEvent"), None)
    floor = sys_at + 1 if sys_at is not None else 0
    if reset:
        start, end = floor, len(evs)
    else:
        tails = []
        if request:
            tails.append(len(evs) // 2 - keep_first - 1)
        if len(evs) > max_size:
            tails.append(max_size // 2 - keep_first - 1)
        if not tails:
            return False
        start = view.find_next(max(keep_first, floor))
        end = view.find_next(len(evs) - min(tails))
        if start is None or end is None or end <= start:
            return False
    forgotten = [e.id for e in evs[start:end]]
    if not forgotten:
        return False
    b.condensation(forgotten, f"SUMMARY of {len(forgotten)} events (state: tests failing in dates.py)", start)
    return True


def simulate(seed: int, steps: int, save_dir: str, *, thinking: float = 0.3, keep_first: int = 2,
             max_size: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    b = Builder(rng, save_dir)
    b.system(dynamic=rng.random() < 0.3)
    b.user("The date test fails after the timezone change. Please fix it.", with_image=rng.random() < 0.2)
    for _ in range(steps):
        step(b, thinking=thinking, keep_first=keep_first, max_size=max_size)
    return b.events


def step(b: Builder, *, thinking: float, keep_first: int, max_size: int, p_condense: float = 0.04) -> None:
    """One turn of the simulated agent: a user message, an assistant message or a batch, then
    maybe a condensation request and the condensation the SDK would make."""
    rng = b.rng
    r = rng.random()
    if r < 0.06:
        b.user(rng.choice(["Also keep the CLI output stable.", "Any progress?"]))
        if rng.random() < 0.3:
            b.user("(and please run the linter)")
    elif r < 0.14:
        b.agent_message(rng.choice(["I found the cause.", ""]), thinking=rng.random() < thinking,
                        reasoning="Summarize for the user." if rng.random() < 0.3 else None)
    else:
        n = rng.choice([1, 1, 1, 2, 2, 3, 4])
        batch(b, n, thinking=rng.random() < thinking)
    v = rng.random()
    if v < p_condense:
        b.request()
        if rng.random() < 0.7:
            condense_like_sdk(b, keep_first, max_size, request=True) or condense_like_sdk(
                b, keep_first, max_size, request=True, reset=True)
    elif v < 2 * p_condense:
        condense_like_sdk(b, keep_first, max_size, request=False)


# --- edits --------------------------------------------------------------------------------------


def _drop(events: list[dict], pred: Callable[[int, dict], bool], rng: random.Random) -> list[dict] | None:
    hits = [i for i, e in enumerate(events) if pred(i, e)]
    if not hits:
        return None
    i = rng.choice(hits)
    return events[:i] + events[i + 1 :]


def _batches(events: list[dict]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        if e["kind"] == "ActionEvent":
            out.setdefault(e["llm_response_id"], []).append(i)
    return out


def edit(events: list[dict], how: str, rng: random.Random) -> list[dict] | None:
    if how == "drop-observation":
        return _drop(events, lambda i, e: e["kind"] == "ObservationEvent", rng)
    if how == "partial-batch":
        multi = [idx for idx in _batches(events).values() if len(idx) > 1]
        if not multi:
            return None
        i = rng.choice(rng.choice(multi)[1:])
        return events[:i] + events[i + 1 :]
    if how == "cut":
        return events[: rng.randrange(3, len(events))]
    if how == "trailing-request":
        return events + [{"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "timestamp": "2026-01-01T01:00:00.000000",
                          "source": "environment", "kind": "CondensationRequest"}]
    if how == "duplicate-result":
        hits = [i for i, e in enumerate(events) if e["kind"] == "ObservationEvent"]
        if not hits:
            return None
        i = rng.choice(hits)
        copy = {**events[i], "id": str(uuid.UUID(int=rng.getrandbits(128), version=4))}
        j = rng.randrange(i + 1, len(events) + 1)
        return events[:j] + [copy] + events[j:]
    if how == "drop-thinking-action":
        return _drop(events, lambda i, e: e["kind"] == "ActionEvent" and bool(e.get("thinking_blocks")), rng)
    if how == "user-between-batch-and-results":
        spots = [idx[-1] + 1 for idx in _batches(events).values()
                 if idx[-1] + 1 < len(events) and events[idx[-1] + 1]["kind"] == "ObservationEvent"]
        if not spots:
            return None
        i = rng.choice(spots)
        msg = {"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)), "timestamp": "2026-01-01T01:00:00.000000",
               "source": "user", "llm_message": {"role": "user", "content": [text("Wait, one more thing.")], "thinking_blocks": []},
               "activated_skills": [], "extended_content": [], "kind": "MessageEvent"}
        return events[:i] + [msg] + events[i:]
    raise ValueError(how)


EDITS = ["drop-observation", "partial-batch", "cut", "trailing-request", "duplicate-result", "drop-thinking-action",
         "user-between-batch-and-results"]


# --- hand-made ----------------------------------------------------------------------------------


def hand_made(save_dir: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    rng = random.Random(7)

    def case(name: str, b: Builder, **extra: Any) -> None:
        cases.append({"id": f"hand/{name}", "events": b.events, **extra})

    def fresh() -> Builder:
        b = Builder(rng, save_dir)
        b.system()
        b.user("Fix the bug.")
        return b

    # one case per tool, each as success and as error, and with an output over 60,000 chars
    for tool in dict.fromkeys(TOOLS):  # each tool once
        for error in (False, True):
            for big in (False, True):
                b = fresh()
                b.n_resp += 1
                b.n_call += 1
                name, args, action, obs = tool(b, big, error)
                cid = f"toolu_h{b.n_call}"
                a = b.add("ActionEvent", "agent", thought=[], thinking_blocks=[], action=action, tool_name=name,
                          tool_call_id=cid, tool_call={"id": cid, "name": name, "arguments": json.dumps(args), "origin": "completion"},
                          llm_response_id=f"r{b.n_resp}", security_risk="UNKNOWN")
                if action is None:
                    del a["action"]
                b.add("ObservationEvent", "environment", tool_name=name, tool_call_id=cid, observation=obs, action_id=a["id"],
                      extended_content=[text("Rule: keep functions short.")] if big else [])
                case(f"tool-{tool.__name__[1:]}-{'error' if error else 'ok'}{'-big' if big else ''}", b)

    # a rejection, an agent error, an empty assistant message, merged user messages, images
    b = fresh()
    batch(b, 2, thinking=False, p_reject=1.0, p_invalid=0.0)
    case("rejections", b)
    b = fresh()
    batch(b, 3, thinking=True, p_invalid=1.0)
    case("agent-errors", b)
    b = fresh()
    b.agent_message("")
    b.user("and?")
    b.user("hello?", with_image=True)
    case("empty-assistant-and-merged-users", b)
    b = fresh()
    b.agent_message("Thinking out loud.", thinking=True, reasoning="Because.")
    case("assistant-thinking-and-reasoning", b)

    # the hard reset: a request on a six-event view with keep_first 4 (the case)
    b = Builder(rng, save_dir)
    b.system()
    b.user("Fix the bug.")
    batch(b, 1, thinking=False, p_invalid=0, p_reject=0)
    b.user("Now the docs.")
    batch(b, 1, thinking=False, p_invalid=0, p_reject=0)
    b.request()
    case("hard-reset-request-keep-first-4", b, condense={"max_size": 120, "keep_first": 4})
    for kf, ms in ((1, 10), (2, 10), (3, 12), (0, 8)):
        case(f"request-keep-first-{kf}", b, condense={"max_size": ms, "keep_first": kf})

    # condenser decisions on longer views: events reason, request, thinking loops
    for seed in range(6):
        events = simulate(1000 + seed, 30, save_dir, thinking=0.5 if seed % 2 else 0.0)
        events = [e for e in events if e["kind"] not in ("Condensation", "CondensationRequest")]
        for kf, ms in ((2, 20), (4, 30)):
            cases.append({"id": f"hand/condense-{seed}-{kf}-{ms}", "events": events, "condense": {"max_size": ms, "keep_first": kf}})
            cases.append({"id": f"hand/condense-request-{seed}-{kf}-{ms}",
                          "events": events + [{"id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                                               "timestamp": "2026-01-01T02:00:00.000000", "source": "environment",
                                               "kind": "CondensationRequest"}],
                          "condense": {"max_size": 400, "keep_first": kf}})

    # several live summaries: the SDK shows all, we show the newest (documented difference)
    b = fresh()
    for _ in range(3):
        batch(b, 1, thinking=False, p_invalid=0, p_reject=0)
    evs = b.events
    b.condensation([evs[2]["id"], evs[3]["id"]], "first summary", 2)
    for _ in range(3):
        batch(b, 1, thinking=False, p_invalid=0, p_reject=0)
    b.condensation([evs[6]["id"], evs[7]["id"]], "second summary", 5)
    case("two-live-summaries", b, difference="latest-summary-only")
    return cases


def generated(save_dir: str, n: int = 30) -> list[dict[str, Any]]:
    cases = []
    for seed in range(n):
        steps = [8, 20, 40, 70][seed % 4]
        events = simulate(seed, steps, save_dir, thinking=[0.0, 0.3, 0.8][seed % 3], keep_first=[2, 4][seed % 2],
                          max_size=[30, 60][seed % 2])
        cases.append({"id": f"gen/{seed}", "events": events})
        rng = random.Random(10_000 + seed)
        for how in EDITS:
            copy = edit(events, how, rng)
            if copy is not None:
                cases.append({"id": f"edit/{seed}/{how}", "events": copy, "edit": how})
    return cases


# --- branched histories (the SDK's history tree) -----------------------------------------------

ROOT_PARENT_ID = "__root__"  # the SDK's parent_id for a new root (after navigate_to(None))
NON_NODES = ("ConversationStateUpdateEvent",)  # appended with a parent, never HEAD


class TreeBuilder(Builder):
    """Writes events as the SDK's ``ConversationState.append_event`` stamps them: each names its
    parent (HEAD when it was appended; none for the log's first event; ``"__root__"`` after
    ``navigate_to(None)``), and each but a ConversationStateUpdateEvent becomes HEAD.
    ``navigate`` moves HEAD as ``LocalConversation.navigate_to`` does; the navigations are kept
    (``[index of the next event, target]``) so that the runner can replay them on the SDK's own
    ConversationState and check every parent it stamps."""

    def __init__(self, rng: random.Random, save_dir: str):
        super().__init__(rng, save_dir)
        self.leaf: str | None = None
        self.head_is_empty = False
        self.by_id: dict[str, dict[str, Any]] = {}
        self.index: dict[str, int] = {}
        self.navigations: list[list[Any]] = []
        self.rewinds: list[str] = []  # what each navigation went to, for the report

    def add(self, kind: str, source: str, **fields: Any) -> dict[str, Any]:
        parent = self.leaf if self.leaf is not None else (ROOT_PARENT_ID if self.events else None)
        if parent is not None:
            fields["parent_id"] = parent
        e = super().add(kind, source, **fields)
        self.by_id[e["id"]] = e
        self.index[e["id"]] = len(self.events) - 1
        if kind not in NON_NODES:
            self.leaf, self.head_is_empty = e["id"], False
        return e

    def state_update(self) -> None:
        key, value = self.rng.choice([("execution_status", "running"), ("execution_status", "idle"),
                                      ("agent_state", {"turn": len(self.events)})])
        self.add("ConversationStateUpdateEvent", "environment", key=key, value=value)

    def navigate(self, uid: str | None, how: str = "") -> None:
        self.navigations.append([len(self.events), uid])
        self.rewinds.append(how or ("empty" if uid is None else self.by_id[uid]["kind"]))
        self.leaf, self.head_is_empty = uid, uid is None

    def path(self, uid: str | None) -> list[dict[str, Any]]:
        """``EventLog.path_to_root``: root first."""
        out = []
        while uid is not None:
            e = self.by_id[uid]
            out.append(e)
            parent = e.get("parent_id")
            if parent == ROOT_PARENT_ID:
                break
            if parent is None:  # the SDK's legacy rule: the event before (none for the first)
                i = self.index[uid]
                parent = self.events[i - 1]["id"] if i > 0 else None
            uid = parent
        return out[::-1]

    def active(self) -> list[dict[str, Any]]:
        return self.path(self.leaf)

    def tips(self) -> list[str]:
        """The nodes no node follows: the tips of the branches, oldest first."""
        has_child = set()
        for i, e in enumerate(self.events):
            if e["kind"] in NON_NODES:
                continue
            parent = e.get("parent_id")
            if parent is None and i > 0:
                parent = self.events[i - 1]["id"]
            has_child.add(parent)
        return [e["id"] for e in self.events if e["kind"] not in NON_NODES and e["id"] not in has_child]

    def case(self, case_id: str, other_leaves: list[str], **extra: Any) -> dict[str, Any]:
        """The case as it stands (copies: the builder may go on for another case)."""
        return {"id": case_id, "events": list(self.events), "navigations": [list(n) for n in self.navigations],
                "leaf": self.leaf, "head_is_empty": self.head_is_empty, "other_leaves": list(other_leaves),
                "rewinds": list(self.rewinds), **extra}


def _mid_batch(path: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Actions on the path that a later action of their batch follows."""
    last: dict[str, int] = {}
    for i, e in enumerate(path):
        if e["kind"] == "ActionEvent":
            last[e["llm_response_id"]] = i
    return [e for i, e in enumerate(path) if e["kind"] == "ActionEvent" and last[e["llm_response_id"]] > i]


REWIND_WEIGHTS = {"observation": 4, "user-message": 2, "mid-batch": 2, "condensation": 3, "other-branch": 1, "empty": 1}


def rewind(b: TreeBuilder, *, go_on: bool = True) -> None:
    """Navigate back, as a user of the SDK does (``conversation.navigate_to``): to an
    observation, a user message, an action in the middle of its batch, a Condensation, an
    event of another branch, or nowhere (a new root); then, with ``go_on``, the next turn."""
    rng = b.rng
    path = b.active()
    on_path = {e["id"] for e in path}
    targets = {
        "observation": [e for e in path if e["kind"] in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent")],
        "user-message": [e for e in path if e["kind"] == "MessageEvent" and e["source"] == "user"],
        "mid-batch": _mid_batch(path),
        "condensation": [e for e in path if e["kind"] == "Condensation"],
        "other-branch": [e for e in b.events if e["id"] not in on_path and e["kind"] not in NON_NODES],
        "empty": [None],
    }
    kinds = [k for k, v in targets.items() if v]
    how = rng.choices(kinds, [REWIND_WEIGHTS[k] for k in kinds])[0]
    target = rng.choice(targets[how])
    b.navigate(None if target is None else target["id"], how)
    if not go_on:
        return
    if how == "empty":
        if rng.random() < 0.7:
            b.system()
        b.user("Start over: fix the date test without touching the parser.")
    elif rng.random() < 0.5:
        b.user(rng.choice(["Let's try another way.", "Go back and run the tests first."]))


def simulate_tree(seed: int, steps: int, save_dir: str, *, thinking: float, keep_first: int, max_size: int,
                  p_rewind: float = 0.1, p_state: float = 0.06) -> TreeBuilder:
    """``simulate`` on a tree: the agent navigates back at random points and goes on from
    there; it condenses the way the SDK does on the branch it is on (before and after each
    rewind), and the SDK's state updates are written between events."""
    rng = random.Random(seed)
    b = TreeBuilder(rng, save_dir)
    if rng.random() < 0.15:
        b.state_update()  # before the first event: the system prompt is then a "__root__"
    b.system(dynamic=rng.random() < 0.3)
    b.user("The date test fails after the timezone change. Please fix it.", with_image=rng.random() < 0.2)
    for _ in range(steps):
        step(b, thinking=thinking, keep_first=keep_first, max_size=max_size, p_condense=0.05)
        if rng.random() < p_state:
            b.state_update()
        if rng.random() < p_rewind and len(b.active()) > 3:
            rewind(b)
    if rng.random() < 0.3:
        rewind(b, go_on=False)  # HEAD left where it was moved to (maybe empty)
    return b


def _other_leaves(b: TreeBuilder, rng: random.Random, k: int = 3) -> list[str]:
    """The tips of abandoned branches (up to ``k``) and one more event off HEAD's path."""
    on_path = {e["id"] for e in b.active()}
    tips = [t for t in b.tips() if t not in on_path]
    out = rng.sample(tips, min(k, len(tips)))
    off = [e["id"] for e in b.events if e["kind"] not in NON_NODES and e["id"] not in on_path and e["id"] not in out]
    if off:
        out.append(rng.choice(off))
    return out


def branched(save_dir: str, n: int = 30) -> list[dict[str, Any]]:
    cases = []
    for seed in range(n):
        b = simulate_tree(5000 + seed, [30, 50, 80, 120][seed % 4], save_dir, thinking=[0.0, 0.3, 0.8][seed % 3],
                          keep_first=[1, 2, 4][seed % 3], max_size=[20, 30][seed % 2])
        cases.append(b.case(f"tree/{seed}", _other_leaves(b, random.Random(20_000 + seed))))
    return cases


def hand_made_trees(save_dir: str) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    rng = random.Random(19)

    def fresh() -> TreeBuilder:
        b = TreeBuilder(rng, save_dir)
        b.system()
        b.user("Fix the bug.")
        return b

    def one(b: TreeBuilder, n: int = 1) -> None:
        for _ in range(n):
            batch(b, 1, thinking=False, p_invalid=0, p_reject=0, p_big=0, p_error=0)

    # navigate into the middle of a range a later condensation forgot, to an observation and
    # to an action (whose result is then on another branch)
    for where, name in ((5, "observation"), (4, "action")):
        b = fresh()
        one(b, 4)  # 2..9
        b.condensation([e["id"] for e in b.events[2:8]], "the first three batches", 2)
        one(b)
        tip = b.leaf
        b.navigate(b.events[where]["id"], f"forgotten-{name}")
        b.user("Go on from here.")
        one(b)
        cases.append(b.case(f"tree-hand/into-forgotten-range-{name}", [tip, b.events[where + 1]["id"]]))

    # navigate to None and start over, and an empty HEAD left as it is
    for go_on in (True, False):
        b = fresh()
        one(b, 2)
        b.request()
        condense_like_sdk(b, 1, 100, request=True)
        one(b)
        tip = b.leaf
        b.navigate(None)
        if go_on:
            b.system()
            b.user("A new task: update the changelog.")
            one(b)
        cases.append(b.case(f"tree-hand/{'start-over' if go_on else 'empty-head'}", [tip]))

    # two siblings, each condensed, below a condensation on their shared prefix
    b = fresh()
    one(b, 5)
    condense_like_sdk(b, 1, 8, request=False)
    one(b)
    fork = b.events[-1]["id"]  # an observation
    tips = []
    for sibling in range(2):
        if sibling:
            b.navigate(fork, "observation")
        one(b, 4)
        assert condense_like_sdk(b, 1, 8, request=False)
        one(b)
        tips.append(b.leaf)
    cases.append(b.case("tree-hand/two-siblings-condensed", tips[:1]))
    # and a third, from the first sibling's Condensation
    first_summary = [e for e in b.path(tips[0]) if e["kind"] == "Condensation"][-1]["id"]
    b.navigate(first_summary, "condensation")
    b.user("Continue from the summary.")
    one(b, 2)
    cases.append(b.case("tree-hand/from-a-sibling-condensation", tips))

    # a rewind into the middle of a batch
    b = fresh()
    batch(b, 3, thinking=True, p_invalid=0, p_reject=0, p_big=0, p_error=0)
    tip = b.leaf
    b.navigate(b.events[3]["id"], "mid-batch")
    b.user("Stop, only run the first one.")
    one(b)
    cases.append(b.case("tree-hand/mid-batch", [tip]))

    # a thinking tool loop whose first batch is answered on one branch only: HEAD's branch
    # leaves the batch incomplete, which breaks the loop it starts (the rest of it goes too)
    b = fresh()
    batch(b, 2, thinking=True, p_invalid=0, p_reject=0, p_big=0, p_error=0)  # 2, 3; results 4, 5
    tip = b.leaf
    b.navigate(b.events[4]["id"], "observation")
    one(b)
    cases.append(b.case("tree-hand/tool-loop-across-a-branch", [tip]))

    # a state update (a child of HEAD, never HEAD) written inside a thinking tool loop, the
    # loop's start forgotten: the SDK's path does not hold the update, so the loop goes on
    b = fresh()
    batch(b, 1, thinking=True, p_invalid=0, p_reject=0, p_big=0, p_error=0)  # 2, 3
    b.state_update()  # 4
    one(b)  # 5, 6: the same tool loop on the SDK's path
    b.condensation([b.events[2]["id"], b.events[3]["id"]], "the first batch", 2)
    b.user("Go on.")
    cases.append(b.case("tree-hand/state-update-inside-a-tool-loop", [b.events[-2]["id"]]))

    # the SDK's state updates: never HEAD, children of HEAD, before the first event
    b = TreeBuilder(rng, save_dir)
    b.state_update()
    b.system()
    b.state_update()
    b.user("Fix the bug.")
    one(b)
    b.state_update()
    tip = b.leaf
    b.navigate(b.events[3]["id"], "user-message")
    b.state_update()
    one(b)
    b.state_update()
    cases.append(b.case("tree-hand/state-updates", [tip]))
    # HEAD moved onto a state update (navigate_to takes any event), and on from there
    target = b.events[-1]["id"]
    b.navigate(target, "state-update")
    b.user("And now?")
    one(b)
    cases.append(b.case("tree-hand/head-on-a-state-update", [tip]))
    return cases


def all_cases(save_dir: str) -> list[dict[str, Any]]:
    cases = generated(save_dir) + hand_made(save_dir) + branched(save_dir) + hand_made_trees(save_dir)
    for c in cases:
        c.setdefault("configs", list(CONFIGS))
    return cases
