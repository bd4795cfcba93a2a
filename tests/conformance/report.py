"""Agreement figures with the real SDK: ``PYTHONPATH=. python -m tests.conformance.report``.

Runs the same cases and the same single SDK subprocess as the test-suite and counts, per
aspect, the cases where this project and the SDK agree (documented differences apart).
Branched histories (``tree``, ``tree-hand``: the SDK's history tree) are counted per view
compared: HEAD's and the one from each abandoned branch's leaf.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from openhands_memory.conversation import EventStore

from . import exports
from .conftest import CASES, CONFIGS, RUNNER, SAVE_DIR, sdk_python
from .test_conformance import difference, options, our_views, same_calls_and_results, stored_tree


def main() -> None:
    python = sdk_python()
    assert python is not None, "no SDK environment (.venv-sdk or $OHM_SDK_VENV)"
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        store = EventStore(cwd / "ours.db")
        export_cases, conversations = exports.build(store, cwd, SAVE_DIR)
        for c in export_cases:
            c["configs"] = list(CONFIGS)
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1", "PYTHONPATH": ""}
        done = subprocess.run([str(python), str(RUNNER)], input=json.dumps({"configs": CONFIGS, "cases": CASES + export_cases}),
                              capture_output=True, text=True, cwd=cwd, env=env, check=True)
        sdk = json.loads(done.stdout)
        n: Counter = Counter()
        for case in CASES:
            theirs = sdk["cases"][case["id"]]
            group = case["id"].split("/")[0]
            n[f"{group}: cases"] += 1
            if "leaf" in case:
                branched(case, theirs, sdk["switches"], store, n)
                continue
            stored, _ = our_views(case, store)
            ours = [e.id for e in stored.events]
            n["unhandled_condensation_request equal"] += stored.unhandled_condensation_request == theirs["unhandled_condensation_request"]
            why = difference(case, stored, theirs["view"])
            if why:
                n[f"documented difference: {why}"] += 1
            if why != "latest-summary-only":
                n[f"{group}: view ids equal"] += ours == theirs["view"]
            if why is None:
                n["messages compared (case x config)"] += len(CONFIGS)
                n["messages equal (case x config)"] += sum(
                    stored.to_messages(**options(sdk["switches"][k])) == theirs["messages"][k] for k in CONFIGS)
                n["trajectories with messages equal in every config"] += all(
                    stored.to_messages(**options(sdk["switches"][k])) == theirs["messages"][k] for k in CONFIGS)
                n["tool results compared"] += sum(1 for m in theirs["messages"]["claude"] if m["role"] == "tool")
            if why == "results-after-their-batch":
                n["results-after-their-batch: assistant and tool messages equal, order aside"] += all(
                    same_calls_and_results(stored.to_messages(**options(sdk["switches"][k])), theirs["messages"][k])
                    for k in CONFIGS)
            if case.get("condense"):
                n["condenser decisions compared"] += 1
        for c in export_cases:
            theirs, view = sdk["cases"][c["id"]], conversations[c["id"]].view()
            n["exports resumed by the SDK"] += "error" not in theirs
            n["exports: SDK view equals ours"] += [e.id for e in view.events] == theirs.get("view")
            n["exports: messages equal"] += all(
                view.to_messages(**options(sdk["switches"][k])) == theirs["messages"][k] for k in CONFIGS)
        store.close()
    print(f"openhands-sdk {sdk['sdk_version']}; {len(CASES) + len(export_cases)} cases")
    for k in sorted(n):
        print(f"  {k}: {n[k]}")


def branched(case: dict, theirs: dict, switches: dict, store: EventStore, n: Counter) -> None:
    """A branched history (the SDK's tree): HEAD's view and the view from each other leaf."""
    n["branched: navigations"] += len(case["navigations"])
    if "error" in theirs:
        n["branched: cases the SDK could not replay"] += 1
        return
    conv, seq_of = stored_tree(case, store)
    views = [(conv.view(), theirs)] + [(conv.view(at=seq_of[u]), theirs["others"][u]) for u in case["other_leaves"]]
    for stored, sdk_view in views:
        n["branched: views compared (HEAD and other leaves)"] += 1
        n["branched: unhandled_condensation_request equal"] += (
            stored.unhandled_condensation_request == sdk_view["unhandled_condensation_request"])
        why = difference(case, stored, sdk_view["view"])
        ours = [e.id for e in stored.events]
        if why:
            n[f"branched: documented difference: {why}"] += 1
        if why == "latest-summary-only":
            n["branched: view ids equal, summaries apart"] += (
                [i for i in ours if not i.endswith("-summary")] == [i for i in sdk_view["view"] if not i.endswith("-summary")])
            continue
        n["branched: view ids equal (documented differences apart)"] += ours == sdk_view["view"]
        if why is None:
            n["branched: messages equal in every config"] += all(
                stored.to_messages(**options(switches[k])) == sdk_view["messages"][k] for k in CONFIGS)


if __name__ == "__main__":
    main()
