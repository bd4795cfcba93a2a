"""litellm, imported once, on first use.

``import litellm`` costs seconds of CPU and much memory, so no module imports it at load time:
a model call (and what ``tokens.py`` cannot answer from litellm's files) calls
:func:`load_litellm`.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from types import ModuleType

_litellm_module: ModuleType | None = None
_litellm_lock = threading.Lock()


def loaded() -> bool:
    """Whether litellm is imported already (so that using it costs nothing more)."""
    return _litellm_module is not None or "litellm" in sys.modules


def load_litellm() -> ModuleType:
    """Import litellm once, configured for offline, quiet use."""
    global _litellm_module
    if _litellm_module is not None:
        return _litellm_module
    with _litellm_lock:
        if _litellm_module is None:
            # Without this litellm fetches its price map over the network at import time
            # (there is none here: warnings plus seconds of retries).
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.telemetry = False
            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners
            litellm.set_verbose = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                logger = logging.getLogger(name)
                if logger.level < logging.WARNING:
                    logger.setLevel(logging.WARNING)
            _litellm_module = litellm
    return _litellm_module
