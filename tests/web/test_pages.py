"""The web inspector over HTTP, the app in process (Starlette's test client), on SQLite and
PostgreSQL: every page and its .json twin, paging, what a missing id says, hostile text kept
inert, and a database left exactly as it was."""

from __future__ import annotations

import hashlib
import os
import html
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from openhands_memory.conversation import EventStore
from openhands_memory.replay.calls import model_calls
from openhands_memory.web import create_app

from .. import factories as f
from .demo import HOSTILE, build


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def location(request, tmp_path_factory):
    if request.param == "sqlite":
        url = str(tmp_path_factory.mktemp("web") / "inspect.db")
    else:
        url = request.getfixturevalue("postgres_database_factory")()
    build(url)
    return url


@pytest.fixture(scope="module")
def client(location):
    with TestClient(create_app(location)) as c:
        yield c


def head_events(location: str, cid: str = "demo") -> list:
    with EventStore(location, create=False, readonly=True) as store:
        conv = store.conversation(cid)
        path = conv.branches()
        head = next(b for b in path if b.head)
        return [e for s, t in head.path for e in conv.events(s, t + 1)]


def test_every_page_and_its_json_twin_answer(client):
    for page in ("/", "/c/demo", "/c/demo/call/1", "/c/demo/call/60", "/c/demo/event/10",
                 "/c/demo/condensation/122", "/c/demo/events", "/search?q=date"):
        response = client.get(page)
        assert response.status_code == 200, page
        assert response.headers["content-type"].startswith("text/html")
        twin = page.replace("?", ".json?", 1) if "?" in page else ("/index.json" if page == "/" else page + ".json")
        data = client.get(twin)
        assert data.status_code == 200, twin
        assert isinstance(data.json(), dict)


def test_the_calls_are_the_recorded_model_calls_as_replay_finds_them(client, location):
    expected = model_calls(head_events(location))
    page = client.get("/c/demo.json").json()
    assert page["calls"] == len(expected) > 100
    for n in (1, 50, len(expected)):
        call = client.get(f"/c/demo/call/{n}.json").json()
        assert call["seq"] == expected[n - 1].seq
        assert call["calls"] == len(expected)


def test_the_call_page_holds_the_view_the_model_got_and_what_was_forgotten(client, location):
    call = client.get("/c/demo/call/60.json").json()
    with EventStore(location, create=False, readonly=True) as store:
        view = store.conversation("demo").view(at=call["at"])
        kept = [e.seq for e in view.events]
    assert [item["seq"] for item in call["view"]] == kept
    roles = [item["role"] for item in call["view"]]
    assert roles[0] == "system" and "summary" in roles  # call 60 comes after condensation 122
    assert call["view_length"] == len(kept)
    assert sum(call["makeup"].values()) == call["tokens"] > 0
    # What was forgotten by then: every event hidden from this view, under its condensation.
    forgotten = set()
    for group in call["forgotten"]:
        assert group["condensation"] <= call["at"]
        for run in group["ranges"].split(", "):
            a, _, b = run.partition("..")
            forgotten.update(range(int(a), int(b or a) + 1))
    shown = {s for s in kept if s is not None}
    assert forgotten and not forgotten & shown
    assert forgotten | shown | {s for s in range(call["at"] + 1) if s not in forgotten and s not in shown} \
        == set(range(call["at"] + 1))


def test_the_change_since_the_previous_call_is_what_was_added_and_forgotten(client):
    calls = client.get("/c/demo.json").json()
    first_condensation = calls["condensations"][0]
    n = first_condensation["before_call"]
    before = client.get(f"/c/demo/call/{n - 1}.json").json()
    after = client.get(f"/c/demo/call/{n}.json").json()
    change = after["change"]
    assert [g["condensation"] for g in change["forgotten"]] == [first_condensation["seq"]]
    assert change["summary_written"] is True
    old = {i["seq"] for i in before["view"] if i["seq"] is not None}
    new = {i["seq"] for i in after["view"] if i["seq"] is not None}
    assert change["added_count"] == len(new - old)
    text = client.get(f"/c/demo/call/{n}").text
    assert "a summary was written" in text and f'/c/demo/condensation/{first_condensation["seq"]}' in text
    assert client.get("/c/demo/call/1.json").json()["change"] is None


def test_previous_and_next_calls_are_linked(client):
    text = client.get("/c/demo/call/50").text
    assert re.search(r'rel="prev" href="/c/demo/call/49"', text)
    assert re.search(r'rel="next" href="/c/demo/call/51"', text)
    last = client.get("/c/demo.json").json()["calls"]
    assert 'rel="next"' not in client.get(f"/c/demo/call/{last}").text


def test_the_conversation_page_draws_the_chart_the_condensations_the_tree_and_the_pins(client):
    page = client.get("/c/demo.json").json()
    assert len(page["chart"]) == page["calls"]  # fewer than 1,000 calls: every one drawn
    assert page["marks"] and all(1 <= m <= page["calls"] + 1 for m in page["marks"])
    assert [c["seq"] for c in page["condensations"]] == sorted(c["seq"] for c in page["condensations"])
    assert all(c["forgotten"] > 0 for c in page["condensations"])
    assert len(page["branches"]) == 2 and sum(b["head"] for b in page["branches"]) == 1
    assert [p["seq"] for p in page["pins"]] == [1]
    text = client.get("/c/demo").text
    assert "<svg" in text and "<polyline" in text and text.count('class="mark"') == len(page["marks"])


def test_another_branch_has_its_own_calls(client):
    page = client.get("/c/demo.json").json()
    other = next(b for b in page["branches"] if not b["head"])
    branch = client.get(f"/c/demo.json?branch={other['leaf']}").json()
    assert branch["branch"] == other["leaf"]
    assert branch["calls"] < page["calls"]
    last = client.get(f"/c/demo/call/{branch['calls']}.json?branch={other['leaf']}").json()
    assert last["seq"] == other["leaf"] - 1  # the branch's action answers its user message
    assert f'?branch={other["leaf"]}' in client.get(f"/c/demo?branch={other['leaf']}").text


def test_the_event_page_links_its_tool_partner_its_condensation_and_its_branches(client):
    call = client.get("/c/demo/call/60.json").json()
    hidden = call["forgotten"][-1]["events"][0]["seq"]
    page = client.get(f"/c/demo/event/{hidden}.json").json()
    assert page["hidden_by"] is not None and page["first_call_without"] is not None
    assert page["first_call_without"] <= 60
    assert len(page["branches"]) == 2  # before the fork point: on both branches
    action = next(i for i in call["view"] if i["kind"] == "ActionEvent")
    event = client.get(f"/c/demo/event/{action['seq']}.json").json()
    assert event["partner"] is not None
    assert client.get(f"/c/demo/event/{event['partner']}.json").json()["partner"] == action["seq"]


def test_the_condensation_page_says_why_and_what_it_forgot(client):
    page = client.get("/c/demo/condensation/122.json").json()
    assert page["strategy"] and page["summary"]
    assert page["forgotten"]["count"] > 0 and page["before_call"] > 1


def test_the_history_is_paged_by_key_with_each_events_state(client, location):
    first = client.get("/c/demo/events.json").json()
    assert len(first["events"]) == 200 and first["next_after"] == 199
    second = client.get("/c/demo/events.json?after=199").json()
    assert second["events"][0]["seq"] == 200
    states = {e["state"] for e in first["events"] + second["events"]}
    assert {"view", "forgotten"} <= states
    with EventStore(location, create=False, readonly=True) as store:
        last = len(store.conversation("demo")) - 1
    tail = client.get(f"/c/demo/events.json?after={last - 3}").json()
    assert [e["state"] for e in tail["events"]][-3:] == ["off-path"] * 3  # the other branch
    only = client.get("/c/demo/events.json?kind=MessageEvent").json()
    assert only["events"] and {e["kind"] for e in only["events"]} == {"MessageEvent"}


def test_the_conversations_are_paged_by_key_and_filtered(tmp_path):
    db = str(tmp_path / "many.db")
    with EventStore(db) as store:
        for i in range(57):
            store.create_conversation(f"run-{i:03}").append(f.user("hi"))
    with TestClient(create_app(db)) as client:
        first = client.get("/index.json").json()
        assert len(first["conversations"]) == 50 and first["next_after"] == "run-049"
        rest = client.get("/index.json?after=run-049").json()
        assert [c["id"] for c in rest["conversations"]] == [f"run-{i:03}" for i in range(50, 57)]
        assert rest["next_after"] is None
        assert [c["id"] for c in client.get("/index.json?q=run-05").json()["conversations"]] == \
            [f"run-{i:03}" for i in range(50, 57)]
        assert client.get("/index.json?q=100%").json()["conversations"] == []  # % is a character


def test_search_links_hits_to_their_event_and_the_first_call_without_them(client):
    found = client.get("/search.json?q=pytest&c=demo&scope=forgotten").json()
    assert found["hits"] and found["error"] is None
    for hit in found["hits"]:
        assert hit["hidden_by"] is not None and hit["first_call_without"] is not None
    everywhere = client.get("/search.json?q=second+conversation&scope=all").json()
    assert [h["conversation"] for h in everywhere["hits"]] == ["other"]
    bad = client.get("/search.json?c=demo&q=" + "a" * 20_000).json()
    assert bad["hits"] == [] and bad["error"]


@pytest.mark.parametrize("page", [
    "/c/nope", "/c/nope.json", "/c/demo/call/0", "/c/demo/call/100000", "/c/demo/event/100000",
    "/c/demo/condensation/5", "/c/demo/call/x", "/c/nope/events", "/c/demo.json?branch=999999", "/nothing",
])
def test_what_does_not_exist_is_a_404_that_says_what_is_missing(client, page):
    response = client.get(page)
    assert response.status_code == 404
    text = response.json()["error"] if page.split("?")[0].endswith(".json") else html.unescape(response.text)
    if "nope" in page:
        assert "no conversation 'nope'" in text
    elif "call/1" in page or "call/0" in page:
        assert "there is no call" in text
    elif "event/" in page or "branch=" in page:
        assert "no event" in text
    elif "condensation/" in page:
        assert "no condensation 5" in text


def test_hostile_text_stays_inert_and_the_policy_forbids_inline_scripts(client):
    found = client.get("/search.json?q=PWNED&c=demo&scope=all").json()["hits"]
    seq = found[0]["seq"]
    for page in (f"/c/demo/event/{seq}", f"/c/demo/events?after={seq - 1}", "/search?q=PWNED&scope=all"):
        response = client.get(page)
        assert "PWNED" in response.text, page
        assert "<script>window" not in response.text and "<img src=x" not in response.text, page
        assert "<svg onload" not in response.text, page
        assert "&lt;script&gt;" in response.text, page
        csp = response.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert HOSTILE in client.get(f"/c/demo/event/{seq}.json").json()["text"]


def test_long_texts_are_cut_in_lists_and_whole_on_their_own_page(tmp_path):
    db = str(tmp_path / "long.db")
    text = "x" * 4_000 + "THE MIDDLE" + "y" * 5_000
    with EventStore(db) as store:
        store.create_conversation("c").append_many([f.system(), f.user(text)])
    with TestClient(create_app(db)) as client:
        listed = client.get("/c/c/events.json").json()["events"][1]
        assert listed["clipped"] and "THE MIDDLE" not in listed["text"] and len(listed["text"]) <= 2_000
        assert "characters left out" in listed["text"]
        assert "THE MIDDLE" in client.get("/c/c/event/1").text


def test_the_chart_has_at_most_a_thousand_points(tmp_path):
    db = str(tmp_path / "calls.db")
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        events = [f.system()]
        for i in range(2_500):
            events += [f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", "ok")]
        conv.append_many(events)
    with TestClient(create_app(db)) as client:
        page = client.get("/c/c.json").json()
        assert page["calls"] == 2_500
        assert len(page["chart"]) == 1_000
        assert page["chart"][-1]["tokens"] >= page["chart"][0]["tokens"]


def test_a_reload_shows_what_a_writer_added_meanwhile(tmp_path):
    db = str(tmp_path / "live.db")
    with EventStore(db) as writer:
        conv = writer.create_conversation("c")
        conv.append_many([f.system(), f.user("go"), f.action("r1", "c1"), f.observation("c1")])
        with TestClient(create_app(db)) as client:
            assert client.get("/c/c.json").json()["calls"] == 1
            conv.append_many([f.action("r2", "c2"), f.observation("c2"), f.agent_says("done")])
            assert client.get("/c/c.json").json()["calls"] == 3
            assert client.get("/c/c/call/3.json").json()["seq"] == 6


def digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.parent.iterdir())}


def test_a_crawl_of_every_page_leaves_the_file_as_it_was_and_cannot_write(tmp_path):
    db = tmp_path / "still.db"
    build(str(db))
    before = digest(db)
    app = create_app(db)
    with TestClient(app) as client:
        seen, todo = set(), ["/"]
        while todo and len(seen) < 400:
            page = todo.pop()
            if page in seen:
                continue
            seen.add(page)
            response = client.get(page)
            assert response.status_code in (200, 404), page
            for link in re.findall(r'href="(/[^"#]*)"', response.text):
                if not link.startswith("/static") and link.replace("&amp;", "&") not in seen:
                    todo.append(link.replace("&amp;", "&"))
        assert len(seen) > 100
        for method in ("post", "put", "delete"):
            assert getattr(client, method)("/c/demo").status_code == 405
        with app.state.stores.lease() as store:
            with pytest.raises(Exception, match="read-only|readonly|write"):
                with store.writing("demo") as session:
                    session.set_metadata("demo", {"changed": True})
    assert digest(db) == before


def test_postgresql_reads_carry_a_statement_timeout(postgres_database_factory):
    location = postgres_database_factory()
    with EventStore(location) as store:
        store.create_conversation("demo").append_many([f.system(), f.user("hi")])
    app = create_app(location, statement_timeout=2.5)
    with TestClient(app) as client:
        assert client.get("/c/demo.json").status_code == 200
        with app.state.stores.lease() as store, store.reading() as db:
            assert db.one("SHOW statement_timeout") == "2500ms"
            assert db.one("SHOW transaction_read_only") == "on"


def test_a_saved_replay_is_listed_and_drawn(tmp_path):
    from ..cli_runner import run

    db = tmp_path / "replayed.db"
    build(str(db))
    before = digest(db)
    with TestClient(create_app(db)) as client:
        assert client.get("/c/demo/replay.json").json()["runs"] == []
        run("replay", db, "demo", "-t", "noop", "-t", "recent,max_events=40", "--save")
        assert digest(db) != before  # --save writes; without it, replay only reads
        runs = client.get("/c/demo/replay.json").json()["runs"]
        assert len(runs) == 1 and runs[0]["strategies"][1:] == ["noop", "recent,max_events=40"]
        page = client.get(f"/c/demo/replay/{runs[0]['id']}.json").json()
        assert [s["label"] for s in page["replay"]["strategies"]] == ["recorded"] + runs[0]["strategies"][1:]
        drawn = client.get(f"/c/demo/replay/{runs[0]['id']}").text
        assert "<svg" in drawn and "recent,max_events=40" in drawn
        assert client.get("/c/demo/replay/999").status_code == 404


def test_replay_save_on_a_read_only_file_says_so_and_writes_nothing():
    import shutil
    import stat
    import tempfile

    from ..cli_runner import run

    # A folder the unprivileged user can reach (pytest's own is root's alone), then made
    # read-only with the file in it.
    folder = Path(tempfile.mkdtemp(prefix="ohm-ro-"))
    try:
        os.chmod(folder, 0o755)
        db = folder / "ro.db"
        build(str(db))
        before = digest(db)
        os.chmod(db, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(folder, 0o555)
        result = subprocess_run(db)
        os.chmod(folder, 0o755)
        assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
        assert "read-only" in result.stderr and "nothing was written" in result.stderr
        assert digest(db) == before
        assert run("replay", db, "demo", "-t", "noop").exit_code == 0  # without --save it only reads
    finally:
        os.chmod(folder, 0o755)
        shutil.rmtree(folder)


def subprocess_run(db: Path):
    """``replay --save`` as a user without root's power over file modes (setpriv drops it)."""
    import shutil
    import subprocess
    import sys

    if os.geteuid() == 0 and shutil.which("setpriv"):
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    else:
        prefix = []
    return subprocess.run([*prefix, sys.executable, "-m", "openhands_memory.cli", "replay", str(db), "demo",
                           "-t", "noop", "--save"], capture_output=True, text=True, timeout=120)


def test_requests_at_once_share_a_few_stores(location):
    from concurrent.futures import ThreadPoolExecutor

    from openhands_memory.web.app import THREADS

    app = create_app(location)
    with TestClient(app) as client:
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda n: client.get(f"/c/demo/call/{n}.json").status_code, range(1, 61)))
        assert codes == [200] * 60
        assert 1 <= len(app.state.stores._all) <= THREADS  # a connection each, never one per request


def test_a_view_sent_whole_lists_its_ends_and_counts_every_item(tmp_path):
    db = str(tmp_path / "whole.db")
    with EventStore(db) as store:
        events = [f.system(), f.user("go")]
        for i in range(600):
            events += [f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", f"out {i}")]
        events.append(f.agent_says("done"))
        store.create_conversation("c").append_many(events)
    with TestClient(create_app(db)) as client:
        call = client.get("/c/c/call/601.json").json()  # the agent's message after 600 calls
        assert call["view_length"] == 1_202
        assert [i["position"] for i in call["view"]] == list(range(40)) + list(range(802, 1_202))
        assert call["view_gap"] == [40, 801]
        assert call["makeup"]["ObservationEvent"] > 0 and sum(call["makeup"].values()) == call["tokens"]
        assert "more items" in client.get("/c/c/call/601").text


def test_the_summarizer_calls_and_their_cost_are_shown_per_condensation(tmp_path, llm_server):
    """Condensations by a priced model behind the loopback server: each one's ledger rows on
    its page, its cost and the cost so far in the conversation's list."""
    from openhands_memory.condensers import LLMSummarizingCondenser
    from openhands_memory.llm import LLMConfig

    db = str(tmp_path / "priced.db")
    config = LLMConfig(model="openai/gpt-4o", api_base=llm_server.url, api_key="sk-test", timeout=5.0,
                       num_retries=1, retry_min_wait=0.01, retry_max_wait=0.05)
    condenser = LLMSummarizingCondenser(llm_config=config, max_size=10, keep_first=1)
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("go")])
        for i in range(30):
            llm_server.push_text(f"summary {i}", prompt_tokens=1000, completion_tokens=100)
            conv.step(condenser)
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", f"out {i}")])
    with TestClient(create_app(db)) as client:
        page = client.get("/c/c.json").json()
        conds = page["condensations"]
        assert len(conds) >= 2 and all(c["cost_usd"] and c["cost_usd"] > 0 for c in conds)
        running = 0.0
        for c in conds:
            running += c["cost_usd"]
            assert c["cumulative_cost_usd"] == pytest.approx(running)
        assert page["summarizer_cost_usd"] == pytest.approx(running)
        detail = client.get(f"/c/c/condensation/{conds[1]['seq']}.json").json()
        (call,) = detail["calls"]
        assert call["model"].endswith("gpt-4o") and call["outcome"] == "ok"
        assert (call["prompt_tokens"], call["completion_tokens"]) == (1000, 100)
        later = client.get(f"/c/c.json?cond_after={conds[0]['seq']}").json()["condensations"]
        assert later[0]["cumulative_cost_usd"] == pytest.approx(conds[0]["cost_usd"] + conds[1]["cost_usd"])
