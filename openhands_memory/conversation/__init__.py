"""The conversation layer: a database's conversations, each with its cached view, its token
counts cached in rows, the one writing context, and condensing.

``store.py`` holds EventStore (one database); ``conversation.py`` Conversation (one history);
``writing.py`` the writing context every writer goes through; ``cache.py`` the latest view,
extended as the agent appends; ``tokens.py`` the counts cached in rows, the token source a
condenser is handed; ``condensing.py`` what a conversation asks of a condenser and the
outcome of one condensing step. Below it: the view (``view/``) and storage (``storage/``).
"""

from .condensing import CondenseOutcome, Strategy
from .conversation import Conversation, duplicate_uid
from .store import DEFAULT_PATH, ConversationInfo, EventStore
from .writing import Writer

__all__ = [
    "DEFAULT_PATH", "CondenseOutcome", "Conversation", "ConversationInfo", "EventStore", "Strategy", "Writer",
    "duplicate_uid",
]
