"""A search answers the same whether its events still wait above the index's watermark or
have been flushed into the index (storage/search_waiting.py), on both backends, and any
query string either searches or is one ``SearchError``."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory.conversation import EventStore
from openhands_memory.conversation.recall import MAX_QUERY, SearchError
from openhands_memory.storage import search

from . import factories as f

_ids = itertools.count()


@pytest.fixture
def store(database_url):
    with EventStore(database_url) as s:
        yield s


def flush_at(store) -> int:
    return search.FLUSH_AT if store.recorder.backend == "sqlite" else search.PG_FLUSH_AT


def watermark(store, cid: str) -> int:
    with store.reading() as db:
        found = db.one(f"SELECT upto FROM {search.STATE} WHERE conversation_id = ?", (cid,))
    return -1 if found is None else found


def flush(store) -> None:
    """What a flush does, at once: every waiting event indexed, the watermarks moved to the
    newest (the code ``search-index on`` and the migrations run; the triggers spell the same
    texts)."""
    with store.writing() as db:
        if store.recorder.backend == "sqlite":
            search.backfill_sqlite(db.execute)
        else:
            search.backfill_postgres(db.execute)


def answer(conv, query: str) -> frozenset[int] | str:
    """The events a search finds (all of them: a limit past the conversation's size), or the
    message of the one error a query may meet."""
    try:
        return frozenset(h.seq for h in conv.search(query, scope="all", limit=500))
    except SearchError as e:
        return f"SearchError: {e}"


# Words the index folds, stems or drops: accents (composed and combining), case outside
# ASCII, Cyrillic and Greek, emoji and punctuation-only words, CJK, stop words, stems, and the
# characters PostgreSQL lowers to ASCII (KELVIN SIGN, dotted I).
SPECIAL = ["École", "ecole", "e\u0301cole", "naïve", "naive", "Ωmega", "ωmega", "ЖУРНАЛ", "журнал", "🔥", "🔥🔥",
           "*", "...", "--", "中文字", "tokNULq", "\u212aelvin", "İstanbul", "checking", "checks", "the", "again",
           "x\0nul", "\0", "ß", "ǅ"]
WORD = st.one_of(st.sampled_from(SPECIAL), st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6))
SEPARATOR = st.sampled_from([" ", "\n", "\0", " \0 ", "-", "\t", "_", ""])


@st.composite
def texts(draw) -> str:
    words = draw(st.lists(WORD, min_size=1, max_size=6))
    return "".join(w + draw(SEPARATOR) for w in words)


@st.composite
def queries(draw, texts: list[str]) -> str:
    """A word or two of the texts, a piece of one, or any string of their characters."""
    words = [w for t in texts for w in t.replace("\0", " ").split()] or ["x"]
    text = draw(st.sampled_from(texts))
    start = draw(st.integers(0, len(text)))
    alphabet = st.sampled_from(sorted(set("".join(texts)) | {"\0", " ", '"'}))
    return draw(st.one_of(
        st.sampled_from(words),
        st.builds(lambda a, b: f"{a} {b}", st.sampled_from(words), st.sampled_from(words)),
        st.builds(lambda n: text[start:start + n], st.integers(1, 12)),
        st.builds(lambda w: f'"{w}"', st.sampled_from(words)),
        st.text(alphabet, min_size=1, max_size=8),
        st.sampled_from(SPECIAL),
    ))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_search_finds_the_same_events_before_and_after_the_flush(store, data):
    """Property: for random texts (any Unicode, NUL, emoji, combining accents, punctuation-
    only words, CJK) and queries made of their words, pieces and characters, the events a
    search finds while they wait above the watermark are the ones it finds once indexed."""
    cid = f"c{next(_ids)}"
    conv = store.create_conversation(cid)
    bodies = data.draw(st.lists(texts(), min_size=1, max_size=5), label="texts")
    conv.append_many([f.user(t) for t in bodies])
    asked = data.draw(st.lists(queries(bodies), min_size=1, max_size=4), label="queries")
    assert watermark(store, cid) == -1
    before = {q: answer(conv, q) for q in asked}
    flush(store)
    assert watermark(store, cid) == len(conv) - 1
    assert {q: answer(conv, q) for q in asked} == before


ACCENTS = "École naïve Ωmega ЖУРНАЛ * 🔥 tokNULq"
QUERIES = ("école", "ecole", "ωmega", "naive", "журнал", "*", "🔥", "ÉCOLE", "Журнал", "naïve", "tokNULq", "ЖУР",
           "Ωme", "🔥 ecole")


def test_folded_words_and_symbols_answer_the_same_across_a_real_flush(store):
    """The words the index folds (accents, case outside ASCII) are found before the flush
    too, and the symbols it has no word for (``*``, an emoji) are found after it no more than
    before; the flush here is the trigger's own, past the threshold."""
    conv = store.create_conversation("c")
    at = conv.append(f.user(ACCENTS))
    before = {q: answer(conv, q) for q in QUERIES}
    conv.append_many([f.user(f"filler {i}") for i in range(flush_at(store))])
    assert watermark(store, "c") >= at
    assert {q: answer(conv, q) for q in QUERIES} == before
    found = ["naïve", "tokNULq", "école", "ωmega", "журнал", "Журнал", "ЖУР"]
    if store.recorder.backend == "sqlite":  # unicode61 folds accents; PostgreSQL's english does not
        found += ["ecole", "naive", "ÉCOLE"]
    assert {q: before[q] for q in found} == {q: {at} for q in found}
    assert before["*"] == before["🔥"] == frozenset()  # no word, and shorter than a fragment


HOSTILE = ["\0", "a\0b", "\0\0\0", "\ud800", "x\udfffy", "\ud83d", " ".join(f"w{i}" for i in range(1000)),
           "x" * (MAX_QUERY + 1), "ab " * (MAX_QUERY // 3), '"' * 1001, '"unterminated', "*", "NEAR(a b)", "a OR b",
           "%_\\", "'; DROP TABLE event; --", "\x1b[31m", "\ufeff", "\u202e", "é" * MAX_QUERY, "🔥" * 3]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_any_query_searches_or_is_one_search_error(store, query):
    conv = store.create_conversation("c")
    conv.append_many([f.user("binary output x\0nul tokNULq"), f.user("a b w1 ab ab")])
    for _ in range(2):  # waiting, then indexed
        got = answer(conv, query)
        assert isinstance(got, frozenset) or "\n" not in got, got
        flush(store)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.one_of(st.text(st.characters(blacklist_categories=()), max_size=40),
                       st.text(st.sampled_from('\0\ud800 "*()-:^~'), max_size=20),
                       st.binary(max_size=30).map(lambda b: b.decode("utf-8", "surrogateescape"))))
def test_any_string_searches_or_is_one_search_error(store, query):
    """Property: whatever a model or a user sends as a query (lone surrogates, NUL, FTS5's
    syntax, bytes that were not UTF-8), the search layer gives hits or one ``SearchError``."""
    conv = store.conversation("c") if "c" in store else store.create_conversation("c")
    if not len(conv):
        conv.append_many([f.user("binary output x\0nul tokNULq"), f.user("(ab) \"cd\" -ef")])
    got = answer(conv, query)
    assert isinstance(got, frozenset) or "\n" not in got, got


@pytest.mark.parametrize("filters, says", [
    ({"tools": ["ter\0m"]}, "tool to search by holds a NUL"),
    ({"kinds": ["\ud800"]}, "kind to search by is not valid text"),
    ({"before": "2026\0"}, "before to search by holds a NUL"),
    ({"after": "\udfff"}, "after to search by is not valid text"),
    ({"limit": 2**61}, "limit must be at most 1,000,000,000"),
])
def test_a_filter_no_column_can_hold_is_one_search_error(store, filters, says):
    """A kind, tool or timestamp is compared with a column, which cannot hold a NUL on
    PostgreSQL (its driver raised DataError) nor a lone surrogate on either backend."""
    conv = store.create_conversation("c")
    conv.append_many([f.action("r", "c0", tool="terminal"), f.observation("c0", "binary x\0nul")])
    assert [h.seq for h in conv.search("binary", scope="all", tools=["terminal"])] == [1]
    with pytest.raises(SearchError, match=says):
        conv.search("binary", scope="all", **filters)


def test_the_waiting_words_follow_rewrites_flushes_other_conversations_and_rollbacks(store):
    """SQLite keeps the waiting texts' words from one search to the next, each text spelled
    again only when its row changes: a rewrite of the same length, a flush, another
    conversation searched in between and a write rolled back are all seen."""
    from openhands_memory.storage.codec import event_row
    from openhands_memory.storage.search import SearchFilters

    def words(cid: str, word: str) -> list[int]:
        with store.reading() as db:
            return [s for s, _ in db.search_words(cid, [word], 10_000, 50, SearchFilters())]

    conv, other = store.create_conversation("c"), store.create_conversation("other")
    at = conv.append(f.user("the frobnicate step"))
    other.append(f.user("the frobnicate step elsewhere"))
    assert words("c", "frobnicate") == [at] and words("other", "frobnicate") == [0]
    rewritten = conv.get(at).to_json().replace("frobnicate", "quuxifyzzz")  # the same length
    with store.writing() as db:
        db.set_payloads("c", [(at, rewritten)])
    assert words("c", "frobnicate") == [] and words("c", "quuxifyzzz") == [at]
    class Undone(Exception):
        pass

    with pytest.raises(Undone):
        with store.writing("c") as db:
            db.insert_events([event_row("c", at + 1, f.user("zyzzyva in a write undone"))])
            assert [s for s, _ in db.search_words("c", ["zyzzyva"], 10_000, 50, SearchFilters())] == [at + 1]
            raise Undone  # the write is rolled back
    assert words("c", "zyzzyva") == [] and words("c", "quuxifyzzz") == [at]
    conv.append_many([f.user(f"step {i}") for i in range(flush_at(store))])
    assert watermark(store, "c") >= at and words("c", "quuxifyzzz") == [at]  # from the index now
    assert words("other", "frobnicate") == [0]
