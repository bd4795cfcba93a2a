"""A NUL in an event's text (tool output holds them) never stops a conversation, and the words
after it are found (searchable.NUL_AS): through every way an event is written, on both
backends; doctor names a conversation whose waiting texts a flush could not index; revision
0015 moves an index built before the rule to it."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from openhands_memory import migrate
from openhands_memory.conversation import EventStore
from openhands_memory.database import Location
from openhands_memory.inspection import doctor
from openhands_memory.io.importer import import_path
from openhands_memory.storage import search, search_text_v1

from . import factories as f

NUL_TEXT = "binary output x\0nul tokNULq"
#: Queries that find the text: a word before the NUL, the word after it, the NUL itself (it
#: reads as a space in queries too), and a fragment across it.
FOUND_BY = ("binary", "tokNULq", "x\0nul", "x nul", "nul tokNULq")


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


def tool_step(call: str, output: str) -> list:
    return [f.action(f"r-{call}", call, args={"command": "cat /bin/true"}), f.observation(call, output)]


def search_problems(store) -> list[str]:
    return [p.detail for p in doctor.check(store, full=True).problems if p.check == "search"]


def kept_and_found(store, cid: str, seq: int) -> None:
    """The event at ``seq`` holds the NUL as it came, and every query finds it, whether it
    waits above the watermark or (after a flush) is indexed; doctor finds the index whole."""
    conv = store.conversation(cid)
    assert conv.get(seq).observation["content"][0]["text"] == NUL_TEXT
    for query in FOUND_BY:
        assert seq in [h.seq for h in conv.search(query, scope="all")], query
    hit = next(h for h in conv.search("tokNULq", scope="all") if h.seq == seq)
    assert hit.snippet[hit.match[0]:hit.match[1]] == "tokNULq" and "\0" not in hit.snippet
    assert search_problems(store) == []


def past_the_flush(store, cid: str, seq: int) -> None:
    conv = store.conversation(cid)
    conv.append_many([e for i in range(flush_at(store) // 2 + 1) for e in tool_step(f"fill{i}", f"passed {i}")])
    assert watermark(store, cid) >= seq


def written_by_append(store, tmp_path) -> tuple[str, int]:
    conv = store.create_conversation("c")
    conv.append(f.action("r0", "c0"))
    return "c", conv.append(f.observation("c0", NUL_TEXT))  # one row: PostgreSQL's libpq append


def written_by_append_many(store, tmp_path) -> tuple[str, int]:
    conv = store.create_conversation("c")
    return "c", conv.append_many(tool_step("c0", NUL_TEXT))[1]  # a batch: PostgreSQL's COPY


def written_in_one_transaction(store, tmp_path) -> tuple[str, int]:
    conv = store.create_conversation("c")
    with conv.writing() as w:
        w.append(tool_step("c0", "first"))
        seq = w.append(tool_step("c1", NUL_TEXT))[1]
        w.append(tool_step("c2", "after"))
    return "c", seq


def imported_jsonl(store, tmp_path) -> tuple[str, int]:
    path = tmp_path / "nul.jsonl"
    path.write_text("".join(e.model_dump_json(exclude_none=True) + "\n"
                            for e in [f.system(), *tool_step("c0", NUL_TEXT)]))
    import_path(store, path, "c")
    return "c", 2


def imported_folder(store, tmp_path) -> tuple[str, int]:
    folder = tmp_path / uuid.uuid4().hex
    (folder / "events").mkdir(parents=True)
    for i, e in enumerate([f.system(), *tool_step("c0", NUL_TEXT)]):
        (folder / "events" / f"event-{i:05d}-{e.id}.json").write_text(e.model_dump_json(exclude_none=True))
    (folder / "base_state.json").write_text(json.dumps({"id": str(uuid.UUID(folder.name))}))
    cid = import_path(store, folder).conversation_id
    return cid, 2


def forked(store, tmp_path) -> tuple[str, int]:
    conv = store.create_conversation("source")
    seq = conv.append_many(tool_step("c0", NUL_TEXT))[1]
    conv.append_many(tool_step("c1", "more"))
    past_the_flush(store, "source", seq)  # the fork copies indexed events and waiting ones
    return store.fork("source", conversation_id="c").id, seq


def indexed_by_search_index_on(store, tmp_path) -> tuple[str, int]:
    conv = store.create_conversation("c")
    store.set_search_index(False)
    seq = conv.append_many(tool_step("c0", NUL_TEXT))[1]
    conv.append_many([e for i in range(flush_at(store) // 2 + 1) for e in tool_step(f"fill{i}", "x")])
    store.set_search_index(True)  # the build indexes every event, the NUL's too
    assert watermark(store, "c") >= seq
    return "c", seq


WRITES = [written_by_append, written_by_append_many, written_in_one_transaction, imported_jsonl, imported_folder,
          forked, indexed_by_search_index_on]


@pytest.mark.parametrize("write", WRITES, ids=[w.__name__ for w in WRITES])
def test_an_event_holding_a_nul_is_kept_and_found_whichever_way_it_is_written(store, tmp_path, write):
    cid, seq = write(store, tmp_path)
    kept_and_found(store, cid, seq)
    if watermark(store, cid) < seq:
        past_the_flush(store, cid, seq)  # the flush that failed every append on PostgreSQL
        kept_and_found(store, cid, seq)
    more = store.conversation(cid).append(f.user("the conversation goes on"))
    assert [h.seq for h in store.conversation(cid).search("conversation goes", scope="all")] == [more]


def test_a_nul_never_stops_a_conversation(store, tmp_path):
    """The reported failure, in order: a NUL accepted, then the flush 128 events later
    (PostgreSQL) failing every append, search and import failing, ``search-index on``
    failing for the whole database, doctor saying healthy."""
    conv = store.create_conversation("c")
    seq = conv.append(f.user(NUL_TEXT))
    for i in range(2 * flush_at(store) // 50 + 1):  # appends of 50 events, two flushes past the NUL
        conv.append_many([f.user(f"step {i}.{k}") for k in range(50)])
    assert watermark(store, "c") >= seq
    assert [h.seq for h in conv.search("tokNULq", scope="all")] == [seq]
    imported = tmp_path / "more.jsonl"
    imported.write_text(f.user("imported x\0nul zyzzyva").model_dump_json() + "\n")
    other = import_path(store, imported, "other").conversation_id
    assert [h.seq for h in store.conversation(other).search("zyzzyva", scope="all")] == [0]
    store.set_search_index(False)
    store.set_search_index(True)
    assert [h.seq for h in conv.search("x\0nul tokNULq", scope="all")] == [seq]
    assert doctor.check(store, full=True).healthy


def test_the_word_after_a_nul_is_found_waiting_and_indexed(store):
    """SQLite's JSON functions ended the text at the NUL: ``binary`` was found, ``tokNULq``
    never was."""
    conv = store.create_conversation("c")
    seq = conv.append(f.user(NUL_TEXT))
    waiting = {q: [h.seq for h in conv.search(q, scope="all")] for q in ("binary", "tokNULq", "toknulq", "NULq")}
    assert waiting == dict.fromkeys(waiting, [seq])
    conv.append_many([f.user(f"step {i}") for i in range(flush_at(store))])
    assert {q: [h.seq for h in conv.search(q, scope="all")] for q in waiting} == waiting


def test_doctor_names_a_conversation_whose_waiting_text_a_flush_cannot_index(store):
    """The state that stopped a conversation: a text waiting above the watermark that the
    flush cannot spell. PostgreSQL: the function as revisions up to 0014 spelled texts (it
    fails on a NUL). SQLite: an event's JSON damaged where it waits (the flush fails on it)."""
    conv = store.create_conversation("c")
    conv.append_many([f.user(f"before {i}") for i in range(3)])
    seq = conv.append(f.user(NUL_TEXT))
    store.create_conversation("fine").append(f.user("nothing wrong here"))
    assert search_problems(store) == []
    with store.writing() as db:
        if store.recorder.backend == "sqlite":
            db.execute("UPDATE event SET payload = substr(payload, 1, 40) WHERE conversation_id = 'c' AND id = ?",
                       (seq,))
        else:
            db.execute(search_text_v1.PG_FUNCTION)
    found = search_problems(store)
    assert len(found) == 1 and found[0].startswith(f"conversation c: the text of event {seq},"), found
    assert "cannot be indexed" in found[0] and "every append" in found[0]
    with pytest.raises(Exception):  # what doctor foretold: the flush fails the append
        conv.append_many([f.user(f"after {i}") for i in range(flush_at(store))])
    if store.recorder.backend == "postgresql":
        with store.writing() as db:
            db.execute(search.PG_FUNCTION)  # the spelling of today's revision: nothing to find
        assert search_problems(store) == []
        conv.append_many([f.user(f"after {i}") for i in range(flush_at(store))])
        assert watermark(store, "c") >= seq


def test_a_text_whose_words_overflow_a_tsvector_is_indexed_by_its_first_words(postgres_database_factory):
    """PostgreSQL's tsvector holds 1 MB: a tool output of some 40,000 distinct words failed
    the flush like a NUL. Its first words are word-indexed, all of it by fragment, before
    the flush and after."""
    with EventStore(postgres_database_factory()) as store:
        conv = store.create_conversation("c")
        words = [uuid.UUID(int=i).hex for i in range(32_000)]  # 1 MB of text: a 1.1 MB tsvector
        seq = conv.append_many(tool_step("c0", " ".join(words)))[1]
        queries = (words[0], words[-1][-12:], "zzzmissing")
        before = {q: [h.seq for h in conv.search(q, scope="all")] for q in queries}
        past_the_flush(store, "c", seq)
        assert {q: [h.seq for h in conv.search(q, scope="all")] for q in queries} == before
        assert before == {words[0]: [seq], words[-1][-12:]: [seq], "zzzmissing": []}
        assert search_problems(store) == []


def _fts_words(path) -> dict[str, int]:
    """The words event_words holds, with how many documents hold each."""
    db = sqlite3.connect(path)
    try:
        db.execute(f"CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, {search.WORDS}, 'row')")
        return {term: docs for term, docs in db.execute("SELECT term, doc FROM temp.v")}
    finally:
        db.close()


def test_revision_0015_indexes_the_words_after_a_nul_and_back_on_sqlite(tmp_path):
    """Down to 0014 the indexed NUL events hold the text as 0014 spelled it (the words after
    the NUL gone); up to 0015 they hold today's. Each move takes a document out with the text
    it was indexed with: deleting the conversation then leaves no word behind."""
    path = tmp_path / "nul.db"
    with EventStore(path) as store:
        conv = store.create_conversation("c")
        seq = conv.append(f.user(NUL_TEXT))
        conv.append(f.user("a literal \\u0000 stays as it is"))
        past_the_flush(store, "c", seq)
    assert _fts_words(path)["toknulq"] == 1 and _fts_words(path)["u0000"] == 1
    migrate.apply(Location.parse(path), "0014", backwards=True)
    words = _fts_words(path)
    assert "toknulq" not in words and words["binari"] == 1 and words["u0000"] == 1
    migrate.apply(Location.parse(path), "head")
    assert _fts_words(path)["toknulq"] == 1
    with EventStore(path) as store:
        assert [h.seq for h in store.conversation("c").search("tokNULq", scope="all")] == [seq]
        assert doctor.check(store, full=True).healthy
        store.delete_conversation("c")
    assert _fts_words(path) == {}


def test_revision_0015_lets_a_stopped_postgres_conversation_flush_again(postgres_database_factory):
    """At 0014, a NUL waiting above the watermark fails every insert that reaches the flush;
    upgraded, the same insert flushes, and the words after the NUL are found."""
    import psycopg

    url = postgres_database_factory()
    with EventStore(url) as store:
        conv = store.create_conversation("c")
        seq = conv.append(f.user(NUL_TEXT))
        conv.append_many([f.user(f"step {i}") for i in range(search.PG_FLUSH_AT - 10)])
    migrate.apply(Location.parse(url), "0014", backwards=True)
    last = search.PG_FLUSH_AT - 10  # ids 0 .. last, none indexed yet
    # Twenty more rows after the last (copies of earlier ones, new uids), one statement.
    more = ("INSERT INTO event (conversation_id, id, kind, source, timestamp, uid, has_thinking, llm_visible, payload) "
            f"SELECT conversation_id, id + {last}, kind, source, timestamp, uid || '-again', has_thinking, "
            "llm_visible, payload FROM event WHERE conversation_id = 'c' AND id BETWEEN 1 AND 20")
    with psycopg.connect(url) as db, pytest.raises(psycopg.errors.UntranslatableCharacter):
        db.execute(more)  # past the flush: the stopped conversation of the report
    migrate.apply(Location.parse(url), "head")
    with psycopg.connect(url) as db:
        db.execute(more)
    with EventStore(url) as store:
        assert watermark(store, "c") == last + 20
        assert [h.seq for h in store.conversation("c").search("tokNULq", scope="all")] == [seq]
        assert search_problems(store) == []
