"""The inspector's test history: the bundled demo session replayed as ``demo`` replays it
(a view before every model call, the default condenser), then a pin, a second branch and an
event holding hostile markup."""

from __future__ import annotations

from openhands_memory.cli.commands_demo import starts_llm_call
from openhands_memory.condensers import default_condenser
from openhands_memory.conversation import EventStore
from openhands_memory.data import DEMO_CONVERSATION
from openhands_memory.events import event_from_json

from .. import factories as f

#: Text a tool might return that must stay inert on every page.
HOSTILE = ('<script>window.PWNED = 1</script><img src=x onerror="window.PWNED = 2">'
           '"><svg onload="window.PWNED = 3"></svg> {{ 7 * 7 }} </pre></details>')


def build(location: str) -> None:
    """Fill ``location`` (an empty database) with conversation ``demo`` and ``other``."""
    with open(DEMO_CONVERSATION, encoding="utf-8") as fh:
        events = [event_from_json(line) for line in fh if line.strip()]
    with EventStore(location) as store:
        conv = store.create_conversation("demo", metadata={"story": "the demo"})
        condenser, previous = default_condenser(), None
        for event in events:
            if starts_llm_call(event, previous):
                conv.step(condenser)
            conv.append(event)
            previous = event
        conv.pin(1, label="the task")
        conv.append(f.user(HOSTILE))
        head = conv.head
        conv.navigate(150)  # a second branch from event 150, then back to the first
        conv.append(f.user("try another way"))
        conv.append(f.action("r-branch", "c-branch", args={"command": "ls branch"}))
        conv.append(f.observation("c-branch", "branch listing"))
        conv.navigate(head)
        other = store.create_conversation("other")
        other.append_many([f.system(), f.user("a second conversation"), f.agent_says("ok")])
