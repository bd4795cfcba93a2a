"""``io/quick_rows.py``: an import's children read the hot kinds' rows with msgspec. Its
promise: it accepts only what pydantic accepts, with the row pydantic's event gives, and
leaves everything else (returns None) to pydantic."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory import events as models
from openhands_memory.io import quick_rows
from openhands_memory.io.common import ImportFailed, parse_event_json
from openhands_memory.storage.codec import event_row

from . import factories as f
from .test_io import sdk_events

PAIRS = [
    (quick_rows.ActionEvent, models.ActionEvent),
    (quick_rows.ObservationEvent, models.ObservationEvent),
    (quick_rows.TextContent, models.TextContent),
    (quick_rows.ImageContent, models.ImageContent),
    (quick_rows.ThinkingBlock, models.ThinkingBlock),
    (quick_rows.RedactedThinkingBlock, models.RedactedThinkingBlock),
    (quick_rows.MessageToolCall, models.MessageToolCall),
]
# Taken from the JSON by pydantic with a default made anew (an id, a timestamp): required here.
MADE_UP = {"id", "timestamp"}


@pytest.mark.parametrize("struct, model", PAIRS, ids=lambda x: x.__name__)
def test_each_struct_declares_its_models_fields_with_the_same_defaults(struct, model):
    info = {f.name: f for f in msgspec.inspect.type_info(struct).fields}
    declared = {name: field for name, field in model.model_fields.items() if name not in ("kind", "type")}
    assert set(info) == set(declared)
    for name, field in declared.items():
        if field.is_required() or name in MADE_UP:
            assert info[name].required, name
        else:
            default = info[name].default if info[name].default is not msgspec.NODEFAULT else info[name].default_factory()
            model_default = field.get_default(call_default_factory=True)
            # A JSON object kept raw has no default of its own: absent, it is None in both.
            assert default == model_default or (default is None and model_default is None), name


def pydantic_row(data: bytes) -> tuple[tuple[Any, ...], str | None]:
    event = parse_event_json(data, "doc")
    return event_row("c", 7, event, data.decode(), checked=False), event.parent_id


def samples() -> list[dict]:
    made = [f.action("r1", "c1"), f.action("r2", "c2", think=True, thought="let me see"), f.observation("c1"),
            f.observation("c2", "x" * 3000), f.observation("c3", "4" * 4000 + "y" * 60_000), f.user("hi")]
    return [json.loads(e.model_dump_json(exclude_none=True)) for e in made] + sdk_events()


@pytest.mark.parametrize("doc", samples(), ids=lambda d: d["kind"])
def test_the_hot_kinds_give_pydantics_row_and_the_others_are_left_to_it(doc):
    data = json.dumps(doc, separators=(",", ":")).encode()
    quick = quick_rows.row("c", 7, data)
    if doc["kind"] in ("ActionEvent", "ObservationEvent"):
        assert quick == pydantic_row(data)
    else:
        assert quick is None


OBSERVATION = json.loads(f.observation("c1").model_dump_json(exclude_none=True))


@pytest.mark.parametrize("data", [
    json.dumps({**OBSERVATION, "observation": {"v": float("nan")}}).encode(),  # NaN, which pydantic takes
    json.dumps({**OBSERVATION, "observation": {"v": "\ud800"}}).encode(),  # a lone surrogate
    json.dumps({**OBSERVATION, "observation": {"v": [[[]]] * 110}}).encode(),  # 221 brackets, depth 3
    json.dumps({**OBSERVATION, "observation": {"v": "N"}}).replace('"N"', "1" + "0" * 4300).encode(),  # refused
    json.dumps({**OBSERVATION, "observation": "text"}).encode(),  # not an object
    json.dumps({k: v for k, v in OBSERVATION.items() if k != "id"}).encode(),  # pydantic makes one up
    json.dumps(OBSERVATION, indent=1).encode(),  # a newline: stored serialized anew
    json.dumps({**OBSERVATION, "tool_name": 3}).encode(),
    json.dumps(OBSERVATION).encode() + b" x",
    b"\xef\xbb\xbf" + json.dumps(OBSERVATION).encode(),
    json.dumps(OBSERVATION).encode().replace(b"output", b"\xff\xfe"),
], ids=["nan", "surrogate", "brackets", "digits", "not-object", "no-id", "newline", "type", "trailing", "bom",
        "not-utf8"])
def test_what_pydantic_may_judge_otherwise_is_left_to_it(data):
    assert quick_rows.row("c", 7, data) is None


def test_a_document_that_may_hold_a_number_pydantic_refuses_is_left_to_it():
    # 4,300 digits in one number pass; so many digits in all might be one such number.
    for digits, refused in ((4300, False), (4301, True)):
        data = json.dumps({**OBSERVATION, "observation": {"v": "N"}}).replace('"N"', "7" * digits).encode()
        if refused:
            with pytest.raises(ImportFailed, match="more than 4,300 digits"):
                parse_event_json(data, "doc")
        else:
            parse_event_json(data, "doc")
        assert quick_rows.row("c", 7, data) is None


def test_deep_json_pydantic_refuses_is_left_to_it():
    deep = json.dumps({**OBSERVATION, "observation": {"v": "DEEP"}}).replace('"DEEP"', "[" * 201 + "]" * 201).encode()
    with pytest.raises(ImportFailed):
        parse_event_json(deep, "doc")
    assert quick_rows.row("c", 7, deep) is None


# --- the promise, on documents changed at random ---------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
    | st.sampled_from(["text", "image", "thinking", "agent", "user", "hook", "completion", "responses", "x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(value: Any, at: tuple = ()) -> list[tuple]:
    found = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, at + (i,))
    return found


@st.composite
def changed_documents(draw) -> bytes:
    doc = copy.deepcopy(draw(st.sampled_from([d for d in samples() if d["kind"] in ("ActionEvent", "ObservationEvent")])))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        *head, last = path
        parent = doc
        for step in head:
            parent = parent[step]
        how = draw(st.sampled_from(["set", "drop", "add"]))
        if how == "set":
            parent[last] = draw(json_values)
        elif how == "drop":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(json_values)
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=draw(st.booleans()))
    return text.encode("utf-8", errors="surrogatepass")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changed_documents())
def test_a_row_read_here_is_the_row_pydantic_gives(data):
    quick = quick_rows.row("c", 7, data)
    if quick is not None:
        assert quick == pydantic_row(data)
