"""The view of a conversation: what the model is shown, and what a condenser may cut.

``view.py`` holds the View; ``query.py`` the SQL-shaped load of the visible tail;
``cache.py`` the per-conversation cache that extends itself on appends; ``enforcement.py``
and ``properties/`` the SDK's four well-formedness properties; ``history.py`` the facts about
events outside the view that enforcement needs; ``manipulation.py`` the cut positions.
"""

from .cache import ViewCache
from .enforcement import Dropped, enforce, manipulation_indices
from .manipulation import ManipulationIndices
from .view import View

__all__ = ["Dropped", "ManipulationIndices", "View", "ViewCache", "enforce", "manipulation_indices"]
