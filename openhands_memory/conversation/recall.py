"""Recall: search what the context forgot, and read it back (``conv.search``, ``conv.read``).

Two lists are asked of the index (``storage/search.py``): events having every word of the
query (stemmed, ranked by bm25 among the newest matches), and events holding the query as a
substring (trigrams: identifiers, paths, error fragments; not asked for a single plain word
the first list already answered in full). They are fused by reciprocal rank
(``1 / (60 + rank)`` summed over the lists), ties going to the newer event. Each list reads
the newest matches first, a page at a time, and stops once enough hits are in scope:

* ``forgotten`` (the default): on the current branch, up to HEAD, and hidden from the model
  by a condensation (what is in view is not worth a tool call);
* ``visible``: what the model sees now; ``all``: the whole branch.

Never another conversation's rows (a conversation's documents are one range of ids) nor
another branch's (hits off the path are dropped).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

from .. import limits, ranges
from ..errors import EventNotFound, OpenHandsMemoryError
from ..events import ActionEvent, ObservationBase
from ..searchable import fold_nul, searched_text
from ..storage import Session
from ..storage.codec import decode
from ..storage.search import SearchFilters
from ..view.rendering import clip, describe

if TYPE_CHECKING:
    from ..view import View

Scope = Literal["forgotten", "visible", "all"]
SCOPES: tuple[str, ...] = ("forgotten", "visible", "all")
RRF_K = 60
SNIPPET = 160  # characters of text around the match
PAGE_FACTOR = 4  # candidates asked of each list per page, per hit wanted
MAX_PAGES = 25
#: The longest query searched (characters): a long error line fits; a pasted page would cost
#: seconds of matching and pass SQLite's limit on a LIKE pattern (50,000 bytes).
MAX_QUERY = 2000


class SearchError(OpenHandsMemoryError, ValueError):
    """A search that cannot run as asked (the message says why)."""


class SearchIndexOff(SearchError):
    """The database keeps no search index: it was switched off."""

    def __init__(self, label: str):
        super().__init__(f"{label} keeps no search index (it was switched off): "
                         f"`openhands-memory search-index {label} on` builds it")


@dataclass(frozen=True)
class Hit:
    """One event found. ``snippet`` is text around the match; ``match`` the (start, end) of
    the match within it, if the match is in the text shown."""

    seq: int
    kind: str
    tool: str | None
    timestamp: str
    snippet: str
    match: tuple[int, int] | None
    score: float
    hidden_by: int | None = None  # the condensation that hid it (scope forgotten or all)
    found_by: tuple[str, ...] = ()  # "words", "substring"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Recalled:
    """One event read back: its text (as a summarizer reads it, cut to ``max_chars``), its
    tool call or result, and its neighbours on the branch, for scrolling."""

    seq: int
    kind: str
    tool: str | None
    timestamp: str
    text: str
    truncated: bool
    pair: int | None
    shown: bool  # whether the model sees it now
    before: list[int] = field(default_factory=list)
    after: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def query_text(query: str) -> str:
    """``query`` as search reads it, stripped: a NUL as a space (``searchable.NUL_AS``, as in
    the texts). A query is anyone's input, a model's too: one no text could hold (a lone
    surrogate, which is not Unicode text) or longer than ``MAX_QUERY`` is a ``SearchError``."""
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SearchError(f"the query is not valid text: {e.reason} at character {e.start}") from None
    query = fold_nul(query).strip()
    if len(query) > MAX_QUERY:
        raise SearchError(f"the query is {len(query):,} characters long: at most {MAX_QUERY:,} are searched")
    return query


def _check_filters(filters: SearchFilters) -> None:
    """A kind, tool name or timestamp to keep is compared with a column, which PostgreSQL
    cannot give a NUL (nor either backend a lone surrogate): such a value is a
    ``SearchError``, on both backends alike, not the driver's."""
    named = [("kind", k) for k in filters.kinds] + [("tool", t) for t in filters.tools] + [
        (name, v) for name, v in (("before", filters.before), ("after", filters.after)) if v is not None]
    for name, value in named:
        if "\0" in value:
            raise SearchError(f"the {name} to search by holds a NUL character (U+0000), which a filter cannot")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise SearchError(f"the {name} to search by is not valid text: {e.reason} at character {e.start}") from None


def terms_of(query: str) -> list[str]:
    """The words of a query (a quoted part is one phrase)."""
    out = []
    for quoted, word in re.findall(r'"([^"]+)"|(\S+)', query):
        term = (quoted or word).strip()
        if term:
            out.append(term)
    return out


def in_scope(seq: int, scope: str, view: "View") -> bool:
    path = view.path if view.path is not None else [(0, view.upto)]
    if seq > view.upto or not ranges.covers(path, seq):
        return False
    if scope == "all":
        return True
    shown = ranges.covers(view.intervals, seq)
    return shown if scope == "visible" else not shown


def search(
    db: Session, cid: str, view: "View", query: str, *, limit: int = 10, scope: str = "forgotten",
    filters: SearchFilters = SearchFilters(), label: str = "this database",
) -> list[Hit]:
    """The best ``limit`` events of ``view``'s branch matching ``query`` in ``scope``."""
    if scope not in SCOPES:
        raise SearchError(f"scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    if not db.search_index_on():
        raise SearchIndexOff(label)
    # At most limits.MAX_COUNT: more than any history holds (a page asks four times as many
    # of each list, which SQL's LIMIT must still hold as a 64-bit integer).
    limit = limits.count(limit, "limit", 1, error=SearchError)
    query = query_text(query)
    _check_filters(filters)
    terms = terms_of(query)
    if not terms:
        raise SearchError("the query is empty: give a word, a phrase in quotes, or a fragment of 3 characters or more")
    ranked: dict[str, list[int]] = {"words": [], "substring": []}
    scores: dict[int, float] = {}
    page = limit * PAGE_FACTOR
    for name in ranked:
        below, found = view.upto, ranked[name]
        if name == "substring" and len(ranked["words"]) >= limit and re.fullmatch(r"[^\W_]+", query):
            # One plain word the word list already answered in full: every substring match
            # of it is a word match too, save ones in longer words, and reading them costs the
            # most (a trigram index must be confirmed against each candidate's text).
            break
        for _ in range(MAX_PAGES):
            if below < 0:
                break
            if name == "words":
                rows = db.search_words(cid, terms, below, page, filters)
                seqs = [s for s, score in rows]
                scores.update({s: score for s, score in rows if s not in scores})
            else:
                seqs = db.search_grams(cid, query, below, page, filters)
            found += [s for s in seqs if in_scope(s, scope, view)]
            if len(seqs) < page or len(found) >= limit * 2:
                break
            below = seqs[-1] - 1
    # Words: bm25 among the newest matches; substrings: newest first.
    ranked["words"].sort(key=lambda s: (-scores.get(s, 0.0), -s))
    fused: dict[int, float] = {}
    for name, seqs in ranked.items():
        for rank, s in enumerate(seqs):
            fused[s] = fused.get(s, 0.0) + 1.0 / (RRF_K + rank + 1)
    best = sorted(fused, key=lambda s: (-fused[s], -s))[:limit]
    rows = {r[0]: r for r in db.event_rows(cid, best)}
    hits = []
    for s in best:
        _, _, kind, tool, timestamp, payload = rows[s]
        snippet, match = snip(searched_text(payload), query, terms)
        hits.append(Hit(
            s, kind, tool, timestamp, snippet, match, round(fused[s], 6),
            db.hidden_by(cid, s) if scope != "visible" and not ranges.covers(view.intervals, s) else None,
            tuple(n for n, seqs in ranked.items() if s in seqs),
        ))
    return hits


def snip(text: str, query: str, terms: Sequence[str], width: int = SNIPPET) -> tuple[str, tuple[int, int] | None]:
    """``width`` characters of ``text`` around the first place the query (or else a term, or
    the stem of one) occurs, on one line; with the match's place in it."""
    lowered = text.lower()
    at, length = lowered.find(query.lower()), len(query)
    for term in ([] if at >= 0 else terms):
        for probe in (term.lower(), term.lower()[: max(3, len(term) - 2)]):
            at = lowered.find(probe)
            if at >= 0:
                length = len(probe)
                break
        if at >= 0:
            break
    flat = re.sub(r"\s", " ", text)
    if at < 0:
        return flat[:width], None
    start = max(0, min(at - (width - length) // 2, len(flat) - width))
    piece = flat[start : start + width]
    return piece, (at - start, min(at - start + length, len(piece)))


def read(db: Session, cid: str, view: "View", seq: int, *, window: int = 2, max_chars: int = 4000) -> Recalled:
    """Event ``seq`` of ``view``'s branch, with its pair and ``window`` neighbours each side."""
    path = view.path if view.path is not None else [(0, view.upto)]
    if seq < 0 or seq > view.upto or not ranges.covers(path, seq):
        if db.event(cid, seq) is None:
            raise EventNotFound(cid, seq)
        raise SearchError(f"event {seq} is not on the current branch (HEAD is {view.upto})")
    (_, _, kind, tool, timestamp, payload), = db.event_rows(cid, [seq])
    event = decode(kind, payload, seq)
    text = describe(event)
    pair = None
    if isinstance(event, (ActionEvent, ObservationBase)):
        near = [s for s in db.results_near(cid, seq, event.tool_call_id) if ranges.covers(path, s)]
        pair = min(near, key=lambda s: abs(s - seq)) if near else None
    return Recalled(
        seq, kind, tool, timestamp, clip(text, max_chars), len(text) > max_chars, pair,
        ranges.covers(view.intervals, seq), _neighbours(path, seq, -window), _neighbours(path, seq, window),
    )


def _neighbours(path: Iterable[ranges.Run], seq: int, step: int) -> list[int]:
    """Up to ``abs(step)`` ids next to ``seq`` on the path, before it (step < 0) or after."""
    ids = [i for s, e in path for i in range(max(s, seq - abs(step) * 4), min(e, seq + abs(step) * 4) + 1)]
    if step < 0:
        return [i for i in ids if i < seq][step:]
    return [i for i in ids if i > seq][:step]
