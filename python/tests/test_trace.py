"""Chrome/Perfetto traces: an encoder's compile and runs as nested, ordered events."""
import json

import numpy as np
import pytest

import kiln


def check_nesting(events):
    """Per thread, events ordered by start, each inside the one enclosing it or after its end:
    the nesting the trace viewers draw. Returns each event's parent (or None)."""
    parents = {}
    by_tid = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():
        starts = [e["ts"] for e in evs]
        assert starts == sorted(starts), f"thread {tid}: events out of order"
        stack = []
        for e in evs:
            end = e["ts"] + e["dur"]
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                top_end = stack[-1]["ts"] + stack[-1]["dur"]
                # Microsecond rounding aside, a child ends inside its parent.
                assert end <= top_end + 0.002, (f"thread {tid}: {e['name']} overlaps "
                                                f"{stack[-1]['name']} without nesting in it")
            parents[id(e)] = stack[-1] if stack else None
            stack.append(e)
    return parents


def test_encoder_trace_nests_compile_passes_runs_and_kernels(encoder):
    engine = kiln.Engine(threads=1, policy="eager", trace=True)
    for seq in (8, 8, 5):
        engine.run(encoder, {"x": np.ones((1, seq, 256), np.float32)})
    trace = json.loads(json.dumps(engine.trace()))  # it is plain JSON
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(e["pid"] == 1 and e["dur"] >= 0 for e in events)
    parents = check_nesting(events)
    cats = {e["cat"] for e in events}
    assert {"run", "compile", "pass", "kernel"} <= cats, cats

    runs = [e for e in events if e["cat"] == "run"]
    assert [e["args"]["inputs"] for e in runs] == [["f32[1, 8, 256]"], ["f32[1, 8, 256]"],
                                                    ["f32[1, 5, 256]"]]
    compiles = [e for e in events if e["cat"] == "compile" and e["name"] == "compile"]
    assert [c["args"]["shape_key"] for c in compiles] == ["encoder(x: f32[1, 8, 256])",
                                                         "encoder(x: f32[1, 5, 256])"]
    # An eager compile happens inside its run; passes inside a compile; each kernel launch
    # inside its run, with the kernel's argument shapes.
    for c in compiles:
        assert parents[id(c)]["cat"] == "run"
    names = {e["name"] for e in events if e["cat"] == "pass"}
    assert {"InferType", "FoldConstant", "FuseOps"} <= names, names
    for e in events:
        if e["cat"] == "pass":
            p = parents[id(e)]
            while p is not None and p["cat"] == "pass":
                p = parents[id(p)]
            assert p is not None and p["cat"] == "compile", e["name"]
        if e["cat"] == "kernel":
            assert parents[id(e)]["cat"] == "run"
            assert "f32[1, " in e["args"]["args"] and e["args"]["shape_key"].startswith("encoder(")
    kernels_per_run = [sum(1 for e in events if e["cat"] == "kernel" and parents[id(e)] is r)
                       for r in runs]
    assert kernels_per_run[0] == kernels_per_run[1] > 3
    assert trace["otherData"]["dropped_events"] == 0


def test_trace_needs_the_option(mlp):
    engine = kiln.Engine(threads=1)
    with pytest.raises(kiln.Error) as e:
        engine.trace()
    assert "does not trace" in str(e.value)
