"""Many Python threads through one engine: right answers, and runs do not hold the GIL."""
import threading
import time

import numpy as np

import kiln


def test_eight_threads_one_engine_match_reference(mlp):
    engine = kiln.Engine(threads=1)
    batches = [1, 2, 3, 5, 8, 13, 2, 1]
    inputs = [np.random.default_rng(b * 10 + i).standard_normal((b, 784)).astype(np.float32)
              for i, b in enumerate(batches)]
    name = mlp.outputs[0].name
    want = [mlp.run_reference({"x": x})[name] for x in inputs]
    errors = []
    start = threading.Barrier(len(batches))

    def work(i):
        try:
            start.wait()
            for _ in range(20):
                got = engine.run(mlp, {"x": inputs[i]})[name]
                np.testing.assert_allclose(got, want[i], rtol=1e-4, atol=2e-5)
        except BaseException as e:  # reported by the main thread
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert engine.stats()["runs"] == 20 * len(batches)


def test_a_run_releases_the_gil(encoder):
    # One long call into kiln (an eager compile of the encoder, then its run) on a thread, while
    # this thread keeps running Python. Were the GIL held through the call, this thread would
    # stop for all of it: the longest gap between its steps would be the call's length.
    engine = kiln.Engine(threads=1, policy="eager")
    x = np.ones((1, 24, 256), np.float32)
    span = {}

    def call():
        span["start"] = time.perf_counter()
        engine.run(encoder, {"x": x})
        span["end"] = time.perf_counter()

    t = threading.Thread(target=call)
    steps = []
    t.start()
    while t.is_alive():
        steps.append(time.perf_counter())
    t.join()
    inside = [s for s in steps if span["start"] <= s <= span["end"]]
    edges = [span["start"]] + inside + [span["end"]]
    longest = max(b - a for a, b in zip(edges, edges[1:]))
    length = span["end"] - span["start"]
    assert length > 0.02, f"the call took {length * 1e3:.1f} ms, too short to tell"
    assert longest < 0.5 * length, (
        f"this thread stopped for {longest * 1e3:.1f} ms of a {length * 1e3:.1f} ms call")
