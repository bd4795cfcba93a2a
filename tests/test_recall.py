"""Recall: the full-text index kept with every write, and ``conv.search`` / ``conv.read``
scoped to what was forgotten on the current branch, on both backends."""

from __future__ import annotations

import functools
import json
import string
import uuid

import pydantic_core
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory import migrate
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.conversation.recall import SearchError, snip
from openhands_memory.database import Location
from openhands_memory.errors import EventNotFound
from openhands_memory.inspection import doctor
from openhands_memory.searchable import text_of
from openhands_memory.storage import search as index
from openhands_memory.storage.search import SearchFilters

from . import factories as f

ERROR = "KeyError: 'frobnicate_widget' in src/parser/config_loader.py line 42"


def history(conv, steps: int = 40, error_at: int = 5) -> int:
    """A task, then tool calls; the result of call ``error_at`` holds ERROR. Returns its id."""
    conv.append_many([f.system(), f.user("Fix the failing parser test")])
    at = -1
    for i in range(steps):
        text = f"Traceback (most recent call last):\n{ERROR}" if i == error_at else f"passed {i} checks"
        seqs = conv.append_many([
            f.action(f"r{i}", f"c{i}", args={"command": f"pytest tests/test_parser.py -k case{i}"}),
            f.observation(f"c{i}", text),
        ])
        if i == error_at:
            at = seqs[1]
    return at


def condensed(conv) -> None:
    conv.step(LLMSummarizingCondenser(max_size=20, keep_first=2))


@pytest.fixture
def store(database_url):
    with EventStore(database_url) as s:
        yield s


def test_a_forgotten_error_is_found_by_a_word_and_by_an_identifier_fragment(store):
    conv = store.create_conversation("c")
    at = history(conv)
    condensed(conv)
    assert at not in conv.view().seqs
    for query in ("frobnicate_widget", "KeyError", "config_loade", "g_loader.py"):
        hits = conv.search(query)
        assert hits and hits[0].seq == at, query
        hit = hits[0]
        assert hit.kind == "ObservationEvent" and hit.tool == "terminal" and hit.hidden_by is not None
        assert hit.match is not None and hit.snippet[hit.match[0]:hit.match[1]].lower() == query.lower()
    assert conv.search("frobnicate_widget", scope="visible") == []
    assert [h.seq for h in conv.search("frobnicate_widget", scope="all")] == [at]
    assert conv.search("frobnicate", tools=["browser"]) == []
    assert conv.search("frobnicate", kinds=["ActionEvent"]) == []
    assert [h.seq for h in conv.search("frobnicate", kinds=["ObservationEvent"])] == [at]


def test_words_are_stemmed_and_ranked_newest_first_on_ties(store):
    conv = store.create_conversation("c")
    history(conv, 30)
    condensed(conv)
    hits = conv.search("checking", limit=5)  # stems as "checks" does
    assert len(hits) == 5 and all("checks" in h.snippet for h in hits)
    assert [h.seq for h in hits] == sorted((h.seq for h in hits), reverse=True)


def test_search_never_returns_another_conversations_rows(store):
    mine, other = store.create_conversation("mine"), store.create_conversation("other")
    history(other)
    history(mine, error_at=-1)  # no error here
    condensed(mine)
    condensed(other)
    assert mine.search("frobnicate_widget", scope="all") == []
    assert mine.search("frobnicate_widget") == []
    assert other.search("frobnicate_widget")


def test_search_keeps_to_the_branch(store):
    conv = store.create_conversation("c")
    history(conv, 10, error_at=-1)
    fork_point = 9
    conv.append(f.user(f"on the first branch: {ERROR}"))
    conv.navigate(fork_point)
    conv.append(f.user("another way"))
    assert conv.search("frobnicate_widget", scope="all") == []
    conv.navigate(len(conv) - 2)  # back to the first branch's leaf
    assert conv.search("frobnicate_widget", scope="all")


def test_read_gives_the_event_its_pair_and_neighbours(store):
    conv = store.create_conversation("c")
    at = history(conv)
    condensed(conv)
    got = conv.read(at, window=2)
    assert ERROR in got.text and got.kind == "ObservationEvent" and not got.shown
    assert got.pair == at - 1 and got.before == [at - 2, at - 1] and got.after == [at + 1, at + 2]
    assert conv.read(at - 1).pair == at
    short = conv.read(at, max_chars=40)
    assert short.truncated and len(short.text) <= 40
    with pytest.raises(EventNotFound):
        conv.read(100_000)


def test_bad_searches_say_why(store):
    conv = store.create_conversation("c")
    history(conv, 3)
    with pytest.raises(SearchError, match="empty"):
        conv.search("   ")
    with pytest.raises(SearchError, match="scope"):
        conv.search("ok", scope="everything")  # type: ignore[arg-type]
    assert conv.search("a'b\"c") == []  # quotes and FTS syntax are words, not syntax


def test_the_index_follows_deletes_forks_and_rewrites(store):
    conv = store.create_conversation("c")
    at = history(conv, flush_at(store) // 2 + 2)  # indexed, not waiting
    copy = conv.fork(at=at, conversation_id="copy")
    assert [h.seq for h in copy.search("frobnicate_widget", scope="all")] == [at]
    store.delete_conversation("c")
    assert [h.seq for h in copy.search("frobnicate_widget", scope="all")] == [at]
    again = store.create_conversation("c")  # the same id, a new history: nothing of the old
    history(again, 3, error_at=-1)
    assert again.search("frobnicate_widget", scope="all") == []
    assert doctor.check(store, full=True).healthy


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_search_returns_only_rows_of_its_conversation_branch_and_scope(tmp_path_factory, data):
    """Property: whatever the histories, branches and condensations, every hit is an event of
    the searching conversation, on its current path, in the scope asked, holding the word."""
    with EventStore(tmp_path_factory.mktemp("recall") / "r.db") as store:
        convs = [store.create_conversation(f"c{k}") for k in range(2)]
        for conv in convs:
            conv.append_many([f.system(), f.user("task")])
        for _ in range(data.draw(st.integers(5, 30))):
            conv = data.draw(st.sampled_from(convs))
            op = data.draw(st.sampled_from(["pair", "pair", "user", "navigate", "condense"]))
            if op == "pair":
                n = len(conv)
                word = data.draw(st.sampled_from(["alpha", "beta", "gamma_ray"]))
                conv.append_many([f.action(f"r{uuid.uuid4()}", f"k{n}"), f.observation(f"k{n}", f"{word} {n}")])
            elif op == "user":
                conv.append(f.user(data.draw(st.sampled_from(["alpha", "delta"]))))
            elif op == "navigate":
                conv.navigate(data.draw(st.integers(1, len(conv) - 1)))
            else:
                conv.step(LLMSummarizingCondenser(max_size=8, keep_first=2))
        for conv in convs:
            view = conv.view()
            path = view.path if view.path is not None else [(0, view.upto)]
            for scope in ("forgotten", "visible", "all"):
                for word in ("alpha", "gamma_ray", "amma_r"):
                    for hit in conv.search(word, limit=50, scope=scope):
                        assert any(s <= hit.seq <= e for s, e in path) and hit.seq <= view.upto
                        event = conv.get(hit.seq)
                        assert word.lower() in text_of(event.to_json()).lower()
                        shown = any(s <= hit.seq <= e for s, e in view.intervals)
                        assert scope == "all" or shown == (scope == "visible")


def test_an_existing_file_is_indexed_by_the_migration_with_progress(tmp_path):
    path = tmp_path / "old.db"
    location = Location.parse(path)
    with EventStore(path) as store:
        at = history(store.create_conversation("c"), 30)
    migrate.apply(location, "0007", backwards=True)
    seen: list[tuple[int, int]] = []
    migrate.progress = lambda done, total: seen.append((done, total))
    try:
        migrate.apply(location, "head")  # through 0008, which builds the index
    finally:
        migrate.progress = None
    assert seen and seen[-1][0] == seen[-1][1] > 0
    with EventStore(path) as store:
        assert [h.seq for h in store.conversation("c").search("frobnicate_widget", scope="all")] == [at]
        assert doctor.check(store, full=True).healthy


def test_snippets_mark_the_match_on_one_line():
    text = "line one\n" + "x" * 300 + " KeyError: boom " + "y" * 300
    piece, (a, b) = snip(text, "keyerror", ["keyerror"], width=60)  # type: ignore[misc]
    assert len(piece) == 60 and "\n" not in piece and piece[a:b] == "KeyError"
    assert snip("nothing here", "zzz", ["zzz"]) == ("nothing here", None)


def flush_at(store) -> int:
    """How many events past its watermark a conversation is indexed at (storage/search.py)."""
    from openhands_memory.storage import search as index

    return index.FLUSH_AT if store.recorder.backend == "sqlite" else index.PG_FLUSH_AT


def watermark(store, cid: str) -> int | None:
    with store.reading() as db:
        return db.one("SELECT upto FROM search_state WHERE conversation_id = ?", (cid,))


def test_events_wait_above_the_watermark_and_are_found_before_and_after_a_flush(store):
    """Both backends index events in batches (storage/search.py): a search finds an event
    whether it is still above the watermark or indexed, and doctor counts both."""
    conv = store.create_conversation("c")
    at = history(conv, 6)
    assert watermark(store, "c") is None
    assert [h.seq for h in conv.search("frobnicate_widget", scope="all")] == [at]  # waiting
    # A needle JSON may escape is matched against the spelled text, not the stored JSON.
    odd = conv.append_many([f.user('the café crashed on "naïve_ñame" <again>'), f.user("and again")])[0]
    for needle in ("naïve_ñame", '"naïve', "CAFÉ"):
        assert [h.seq for h in conv.search(needle, scope="all")] == [odd], needle
    # The word "again" is in both, as the index will say after the flush, the fragment in one;
    # PostgreSQL's english configuration drops "again" as a stop word, before and after.
    again = [odd, odd + 1] if store.recorder.backend == "sqlite" else [odd]
    assert [h.seq for h in conv.search("<again>", scope="all")] == again
    first = len(conv)
    history(conv, (flush_at(store) - first - 2) // 2 - 1, error_at=-1)  # short of a flush by two events
    assert watermark(store, "c") is None and len(conv) == flush_at(store) - 2
    conv.append_many([f.user("one more"), f.user("and the flush")])
    assert watermark(store, "c") == flush_at(store) - 1
    assert [h.seq for h in conv.search("frobnicate_widget", scope="all")] == [at]  # indexed
    assert [h.seq for h in conv.search("config_loade", scope="all")] == [at]
    last = conv.append(f.user("a late KeyError: zyzzyva_overflow"))
    assert [h.seq for h in conv.search("zyzzyva_overflow", scope="all")] == [last]
    assert last in [h.seq for h in conv.search("KeyErrors", scope="all", limit=3)]  # stemmed above the watermark
    history(conv, flush_at(store), error_at=-1)  # flushed again, in the middle of append_many's batches
    assert watermark(store, "c") >= last
    assert [h.seq for h in conv.search("zyzzyva_overflow", scope="all")] == [last]
    # (the two histories reuse tool call ids, which doctor rightly names; the index is whole)
    assert [p for p in doctor.check(store, full=True).problems if p.check == "search"] == []


@pytest.mark.parametrize("near", [1, 32])
def test_a_fragment_is_found_in_every_block_newest_first(store, monkeypatch, near):
    """PostgreSQL probes the newest blocks of 1,024 ids one by one, then reads older ones in
    one statement (storage/search.py): matches spread over three blocks, some still waiting
    above the watermark, come back newest first, a page at a time, wherever they are."""
    from openhands_memory.storage import search as index

    monkeypatch.setattr(index, "PG_GRAMS_NEAR", near)
    conv = store.create_conversation("c")
    conv.append_many([f.system(), f.user("Fix the failing parser test")])
    expected = []

    def steps(first: int, count: int) -> None:
        texts = [f"passed {i} checks" if i % 65 else f"KeyError in widget_{i}_frobnicate_cache"
                 for i in range(first, first + count)]
        seqs = conv.append_many([e for i, t in enumerate(texts, first)
                                 for e in (f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", t))])
        expected.extend(seqs[2 * k + 1] for k, t in enumerate(texts) if "frobnicate" in t)

    for first in range(0, 1_350, 150):
        steps(first, 150)  # 300 events a transaction: PostgreSQL indexes them at once
    steps(1_365, 1)  # two more, which wait above the watermark on both backends
    assert watermark(store, "c") < expected[-1] <= len(conv) - 1
    expected.sort(reverse=True)
    last = len(conv) - 1
    with store.reading() as db:  # the substring list, newest first, before it is fused with the words'
        for limit in (30, len(expected), 4, 1):
            assert db.search_grams("c", "_frobnicate_cach", last, limit, SearchFilters()) == expected[:limit]
        assert db.search_grams("c", "_frobnicate_cach", last, 30, SearchFilters(kinds=("ActionEvent",))) == []
        assert db.search_grams("c", "_frobnicate_cach", expected[5], 30, SearchFilters()) == expected[5:]
    assert {h.seq for h in conv.search("_frobnicate_cach", scope="all", limit=30)} == set(expected)


def test_an_indexed_event_rewritten_is_found_by_its_new_text_only(store):
    conv = store.create_conversation("c")
    at = history(conv, flush_at(store) // 2 + 2)
    assert watermark(store, "c") >= at  # indexed, not waiting
    event = conv.get(at).to_json().replace("frobnicate_widget", "quuxify_gadget")
    with store.writing() as db:
        db.set_payloads("c", [(at, event)])
    assert conv.search("frobnicate_widget", scope="all") == []
    assert [h.seq for h in conv.search("quuxify_gadget", scope="all")] == [at]
    assert [h.seq for h in conv.search("uxify_gadg", scope="all")] == [at]
    assert [p for p in doctor.check(store, full=True).problems if p.check == "search"] == []


def test_the_index_switched_off_and_on_again(store):
    """Off: appends skip the index and search says how to turn it on; doctor finds nothing
    wrong. On again: every event is indexed, those appended meanwhile too."""
    from openhands_memory.conversation.recall import SearchIndexOff

    conv = store.create_conversation("c")
    history(conv, 10, error_at=2)
    assert store.search_index is True
    assert store.set_search_index(False) is True and store.set_search_index(False) is False
    assert store.search_index is False
    late = conv.append_many([f.user("the widget frobnicator crashed again: zyxwv_frob")])[0]
    with pytest.raises(SearchIndexOff, match="search-index .* on"):
        conv.search("zyxwv_frob", scope="all")
    assert doctor.check(store, full=True).healthy
    seen: list[tuple[int, int]] = []
    assert store.set_search_index(True, lambda done, total: seen.append((done, total))) is True
    assert [h.seq for h in conv.search("zyxwv_frob", scope="all")] == [late]
    assert conv.search("frobnicate_widget", scope="all")
    assert doctor.check(store, full=True).healthy
    if store.recorder.backend == "sqlite":  # PostgreSQL builds an index in one statement
        assert seen and seen[-1][0] == seen[-1][1] == len([e for e in conv if e.kind != "SystemPromptEvent"])


def test_revision_0011_turns_the_queue_into_watermarks_and_back(tmp_path):
    """Down to 0010, the events above the watermark are queued again; up to 0011, what the
    queue held is indexed and the watermark is the newest event. A search finds an event
    either way, and the next flush comes FLUSH_AT events past the watermark."""
    import sqlite3

    from openhands_memory.storage import search as index
    from openhands_memory.storage import search_queue

    def counts(path) -> tuple[int, int | None]:
        db = sqlite3.connect(path)
        try:
            docs = db.execute(f"SELECT COUNT(*) FROM {index.WORDS}_docsize").fetchone()[0]
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if index.STATE in tables:
                return docs, db.execute(f"SELECT MAX(upto) FROM {index.STATE}").fetchone()[0]
            return docs, -db.execute(f"SELECT COUNT(*) FROM {search_queue.PENDING}").fetchone()[0]
        finally:
            db.close()

    path = tmp_path / "queue.db"
    location = Location.parse(path)
    with EventStore(path) as store:
        at = history(store.create_conversation("c"), 30, error_at=3)
    assert counts(path) == (0, None)  # 61 searchable events, all above the watermark
    migrate.apply(location, "0010", backwards=True)
    assert counts(path) == (0, -61)  # all 61 queued
    migrate.apply(location, "head")
    assert counts(path) == (61, 61)  # indexed; the watermark at the newest event (id 61)
    migrate.apply(location, "0010", backwards=True)
    assert counts(path) == (61, 0)  # nothing above the watermark: nothing queued
    migrate.apply(location, "head")
    with EventStore(path) as store:
        conv = store.conversation("c")
        assert [h.seq for h in conv.search("frobnicate_widget", scope="all")] == [at]
        history(conv, index.FLUSH_AT // 2 - 2, error_at=-1)  # 1,022 events: not yet a flush
        assert counts(path) == (61, 61)
        history(conv, 1, error_at=-1)  # the 1,024th past the watermark flushes
        assert counts(path)[1] == 61 + index.FLUSH_AT
        assert [h.seq for h in conv.search("config_loade", scope="all")] == [at]
        # (the two histories reuse tool call ids, which doctor rightly names; the index is whole)
        assert [p for p in doctor.check(store, full=True).problems if p.check == "search"] == []


def test_revision_0012_moves_postgres_search_into_a_table_of_texts_and_back(postgres_database_factory):
    """Down to 0011, PostgreSQL's expression indexes are built again and the texts go; up to
    0012, every searchable event's text is spelled and the watermark is the newest event."""
    import psycopg

    from openhands_memory.storage import search as index
    from openhands_memory.storage import search_expression

    def state(url) -> tuple[set[str], int | None, int | None]:
        with psycopg.connect(url) as conn:
            names = {r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() UNION "
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
            if index.PG_TEXTS not in names:
                return names, None, None
            texts = conn.execute(f"SELECT COUNT(*) FROM {index.PG_TEXTS}").fetchone()[0]
            return names, texts, conn.execute(f"SELECT MAX(upto) FROM {index.STATE}").fetchone()[0]

    url = postgres_database_factory()
    location = Location.parse(url)
    with EventStore(url) as store:
        at = history(store.create_conversation("c"), 30, error_at=3)  # 62 events, all waiting
    names, texts, upto = state(url)
    assert {index.PG_WORDS_INDEX, index.PG_GRAMS_INDEX} <= names and (texts, upto) == (0, None)
    migrate.apply(location, "0011", backwards=True)
    names, texts, _ = state(url)
    assert {search_expression.WORDS_INDEX, search_expression.GRAMS_INDEX} <= names and texts is None
    assert index.STATE not in names
    migrate.apply(location, "head")
    names, texts, upto = state(url)
    assert search_expression.WORDS_INDEX not in names and (texts, upto) == (61, 61)  # all but the system prompt
    with EventStore(url) as store:
        conv = store.conversation("c")
        assert [h.seq for h in conv.search("frobnicate_widget", scope="all")] == [at]
        assert [h.seq for h in conv.search("config_loade", scope="all")] == [at]
        assert doctor.check(store, full=True).healthy


def test_revision_0013_leads_postgres_trigram_index_with_the_block_and_back(postgres_database_factory):
    """Up to 0013 the trigram index is keyed by the id's block (probed block by block); down
    to 0012, by the id again; a fragment is found either side of the move."""
    import psycopg

    from openhands_memory.storage import search as index

    def grams_key(url) -> str:
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                (index.PG_GRAMS_INDEX,)).fetchone()[0].split("USING gin ")[1]

    url = postgres_database_factory()
    location = Location.parse(url)
    with EventStore(url) as store:
        conv = store.create_conversation("c")
        at = history(conv, 140, error_at=3)  # 282 events: two flushes of the texts
    assert grams_key(url) == "(((id >> 10)), body gin_trgm_ops)"
    migrate.apply(location, "0012", backwards=True)
    assert grams_key(url) == "(id, body gin_trgm_ops)"
    migrate.apply(location, "head")
    assert grams_key(url) == "(((id >> 10)), body gin_trgm_ops)"
    with EventStore(url) as store:
        conv = store.conversation("c")
        assert [h.seq for h in conv.search("config_loade", scope="all")] == [at]
        assert doctor.check(store, full=True).healthy


def test_doctor_names_a_broken_search_index(store):
    """A trigger dropped by hand, or a text the index holds that no event has: doctor --full
    says which, on both backends."""
    from openhands_memory.storage import search as index

    conv = store.create_conversation("c")
    history(conv, flush_at(store) // 2 + 2)
    sqlite = store.recorder.backend == "sqlite"
    with store.writing() as db:
        db.execute(f"INSERT INTO {index.WORDS}(rowid, body) VALUES (1, 'stray')" if sqlite
                   else f"DELETE FROM {index.PG_TEXTS} WHERE conversation_id = 'c' AND id = 3")
        db.execute("DROP TRIGGER event_search_flush" + ("" if sqlite else " ON event"))
    found = [p.detail for p in doctor.check(store, full=True).problems if p.check == "search"]
    assert any("event_search_flush missing" in d for d in found), found
    assert any("watermark" in d for d in found), found


# The encoders an event's stored JSON may come from: the store's own (pydantic), Python's
# json either way, and one that escapes for HTML as some do.
ENCODERS = {
    "pydantic": lambda text: pydantic_core.to_json({"text": text}).decode(),
    "json": lambda text: json.dumps({"text": text}, ensure_ascii=False),
    "json-ascii": lambda text: json.dumps({"text": text}),
    "json-html": lambda text: json.dumps({"text": text}).translate({ord(c): f"\\u{ord(c):04x}" for c in "<>&'"}),
}


@functools.cache
def raw_alphabet() -> list[str]:
    """Every character of the Basic Multilingual Plane the raw search takes (``raw_safe``)."""
    return [c for c in map(chr, range(0x10000)) if index.raw_safe(c)]


def test_every_character_the_raw_search_takes_is_written_as_it_is_by_every_encoder():
    alphabet = raw_alphabet()
    # Identifiers and paths are what the raw search is for: it must take their characters.
    assert set(string.ascii_letters + string.digits + "_-./") <= set(alphabet)
    for name, encode in ENCODERS.items():
        # Between letters, so a character JSON's own syntax holds (a quote) is not found there.
        escaped = [c for c in alphabet if f"x{c}x" not in encode(f"x{c}x")]
        assert escaped == [], f"{name} escapes {escaped}"


@settings(max_examples=300, deadline=None)
@given(before=st.text(), needle=st.text(st.deferred(lambda: st.sampled_from(raw_alphabet())), min_size=1),
       after=st.text())
def test_a_needle_the_raw_json_is_searched_for_is_in_the_json_of_every_text_holding_it(before, needle, after):
    """Property: the events waiting above the watermark are first searched in their stored
    JSON (storage/search.raw_safe); that must never miss one whose text holds the needle,
    whatever the encoder escapes around it. Needles are drawn from the characters the raw
    search takes, so every example is one it would search."""
    assert index.raw_safe(needle)
    text = before + needle + after
    for name, encode in ENCODERS.items():
        assert needle.lower() in encode(text).lower(), name
