"""The view of a conversation: what the model is shown, and what a condenser may cut.

``view.py`` holds the View (a value: it knows no conversation); ``query.py`` the SQL-shaped
load of the visible tail; ``enforcement.py`` and ``properties/`` the SDK's four
well-formedness properties; ``history.py`` the facts about events outside the view that
enforcement needs; ``manipulation.py`` the cut positions; ``messages.py`` and
``observations.py`` the provider messages a view renders to; ``tokens.py`` the counters and
the token source a condenser is given. The cache that keeps a conversation's latest view is
the conversation's (``conversation/cache.py``).
"""

from .enforcement import Dropped, enforce, manipulation_indices
from .manipulation import ManipulationIndices
from .view import View

__all__ = ["Dropped", "ManipulationIndices", "View", "enforce", "manipulation_indices"]
