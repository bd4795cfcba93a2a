"""A chat-messages history for any agent loop: chat-completions messages and Responses API
items kept as a conversation's events, condensed by any strategy, sent back as they were
given (``history.py``; how items map onto events: ``items.py``).

    from openhands_memory import ChatHistory
    h = ChatHistory("agent.db", "run-1", condenser="llm_summarizing", max_tokens=60_000)
    h.append({"role": "user", "content": "Fix the failing date test"})
    messages = h.messages()
"""

from .history import ChatHistory, Entry, strategy_of
from .items import CALL_OUTPUTS, kind_of
from .units import tail

__all__ = ["CALL_OUTPUTS", "ChatHistory", "Entry", "kind_of", "strategy_of", "tail"]
