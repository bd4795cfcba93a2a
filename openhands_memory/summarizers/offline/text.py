"""Event text made short and plain: clipped to a length, on one line, without blank lines,
and the line of an error output most worth keeping."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ...events import ImageContent, TextContent


def clip(text: str, limit: int) -> str:
    """Keep the head and tail of ``text`` within ``limit`` characters, saying how much was cut.

    The result is never longer than ``limit``, so clipping clipped text changes nothing. That
    keeps a rolled summary stable as it passes through the parser again and again.
    """
    if len(text) <= limit:
        return text
    # Size the note for the largest number it could hold, then spend the rest on text.
    budget = limit - len(f" [... {len(text)} chars clipped ...] ")
    if budget < 2:
        return text[:limit]
    head = (budget * 2 + 2) // 3  # the start of a request or message usually says the most
    tail = budget - head
    cut = len(text) - head - tail
    return f"{text[:head]} [... {cut} chars clipped ...] {text[len(text) - tail:] if tail else ''}".rstrip(" ")


def one_line(text: str) -> str:
    return " ".join(text.split())


def block(text: str) -> str:
    """``text`` without blank lines or trailing spaces.

    Each entry is then one unbroken block, which reads back exactly as it was written. That is
    why a digest is unchanged when it is rolled over with no new events.
    """
    return "\n".join(ln.rstrip() for ln in text.splitlines() if ln.strip())


def content_text(parts: Sequence[Any]) -> str:
    texts = [p.text for p in parts if isinstance(p, TextContent) and p.text.strip()]
    images = sum(len(p.image_urls) for p in parts if isinstance(p, ImageContent))
    if images:
        texts.append(f"[{images} image{'s' if images > 1 else ''} attached]")
    return block("\n".join(texts))


_TRACEBACK_END = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")
_ERRORISH = re.compile(
    r"error|exception|fail|fatal|denied|not found|no such|cannot|can't|invalid|refused|timed? ?out",
    re.IGNORECASE,
)
_DECORATION = re.compile(r"^[\W_]+$|^[=\-*#_]{3,}.*[=\-*#_]{3,}$")


def first_meaningful_line(text: str) -> str:
    """The line of an error output most worth keeping. This is a heuristic.

    * A Python traceback gives its final exception line. Its first line only says
      "Traceback".
    * Otherwise the first line that sounds like an error. Tools such as pytest print banners
      and platform lines before the failure.
    * Otherwise the first non-blank line that is not decoration.
    """
    lines = [ln.strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not _DECORATION.match(ln)]
    if not lines:
        return ""
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        ends = [ln for ln in lines if _TRACEBACK_END.match(ln)]
        if ends:
            return ends[-1]
    for ln in lines:
        if _ERRORISH.search(ln) and not ln.startswith("Traceback (most recent call last)"):
            return ln
    return lines[0]
