"""The only package that talks to litellm: configuration, completion with retries, token counts.

``import litellm`` costs seconds of CPU and much memory, so only a model call imports it
(``loader.py``); importing this package stays cheap, and token counts, context windows and
prices come from the files litellm ships, read without importing it.

* ``config.py``      how to reach a model (``LLMConfig``), from Python, TOML or the environment
* ``records.py``     what a call leaves behind: ``LLMCall``, ``LLMReply``, ``ToolCall``
* ``errors.py``      the errors a call raises, and which kind each provider failure is
* ``retry.py``       which failures are retried, and the wait before each retry
* ``reply.py``       litellm's response or exception as our records
* ``completion.py``  ``complete``: the request, a deadline per attempt, the retry loop
* ``reach.py``       before litellm is imported: does the model's server take connections?
* ``tokens.py``      token counts, context windows and prices
* ``counting.py``    litellm's token counts, from its tokenizers' files
* ``price_map.py``   litellm's price map, read as JSON

Every call produces an :class:`LLMCall` record (model, tokens, cost, latency, outcome,
attempts) whether it succeeds (inside :class:`LLMReply`) or fails (on :class:`LLMError`),
so callers can persist what each summarisation cost.

Outcome vocabulary (``LLMCall.outcome`` and ``LLMError.kind``):

``ok``             the provider answered with a parseable completion.
``rate_limited``   HTTP 429; retried.
``server_error``   HTTP 5xx, service unavailable, a connection lost mid-exchange; retried.
``connection_error`` no connection could be made (refused, unreachable, a name that does
                   not resolve): no HTTP exchange happened, so there is no status; the
                   error names the address tried; retried (a server may be starting).
``timeout``        no complete answer within ``LLMConfig.timeout`` seconds; retried. The
                   timeout is a deadline for the whole attempt (connecting, sending,
                   and reading the reply to its last byte), not a limit between two
                   bytes: a server that drips its reply cannot hold a call longer.
``context_window`` the prompt does not fit the model; never retried (shrink it instead).
``bad_response``   HTTP 200 whose body is not a usable completion (not JSON, no choices,
                   a reply longer than ``MAX_REPLY_CHARS``);
                   not retried: it usually means ``api_base`` points at something that
                   is not an OpenAI-compatible endpoint, and repeating will not help.
``error``          anything else (auth failures, other 4xx, bad arguments); not retried.
"""

from __future__ import annotations

from .cache import CostLimitReached, ReplyCache
from .completion import complete
from .config import LLMConfig
from .errors import ContextWindowError, LLMError, TokenizerUnavailable, classify_error
from .records import OUTCOMES, LLMCall, LLMReply, ToolCall
from .reply import MAX_REPLY_CHARS
from .tokens import context_window, count_tokens, effective_max_input_tokens, token_prices

__all__ = [
    "MAX_REPLY_CHARS",
    "OUTCOMES",
    "ContextWindowError",
    "CostLimitReached",
    "LLMCall",
    "LLMConfig",
    "LLMError",
    "LLMReply",
    "ReplyCache",
    "TokenizerUnavailable",
    "token_prices",
    "ToolCall",
    "classify_error",
    "complete",
    "context_window",
    "count_tokens",
    "effective_max_input_tokens",
]
