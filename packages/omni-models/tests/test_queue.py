import threading

import pytest

from omni_models.common.queue import HandoffError, PreparedRequestQueue


def make():
    return PreparedRequestQueue("moss_tts_local", src="preprocessing", dst="tts_engine")


def test_begin_publish_pop_hands_over_the_object_once():
    q = make()
    obj = object()
    q.begin("r1")
    assert "r1" in q
    q.publish("r1", obj)
    assert q.pop("r1") is obj
    assert len(q) == 0
    with pytest.raises(HandoffError, match="no prepared request for r1"):
        q.pop("r1")


def test_publish_without_begin_fails_closed():
    q = make()
    with pytest.raises(HandoffError, match="begin\\(\\) was not called"):
        q.publish("r1", 1)
    assert "r1" not in q


def test_publish_after_abort_fails_closed_and_pop_says_aborted():
    q = make()
    q.begin("r1")
    assert q.abort("r1") is True
    with pytest.raises(HandoffError, match="it was aborted"):
        q.publish("r1", 1)
    with pytest.raises(HandoffError, match="it was aborted"):
        q.pop("r1")


def test_double_begin_and_double_publish_are_rejected():
    q = make()
    q.begin("r1")
    with pytest.raises(HandoffError, match="already begun"):
        q.begin("r1")
    q.publish("r1", 1)
    with pytest.raises(HandoffError, match="already published"):
        q.publish("r1", 2)
    assert q.pop("r1") == 1


def test_missing_state_error_names_the_process_local_edge():
    with pytest.raises(HandoffError) as info:
        make().pop("req-9")
    message = str(info.value)
    assert "moss_tts_local: no prepared request for req-9" in message
    assert "the handoff preprocessing -> tts_engine is process-local; keep both stages in one process" in message


def test_pop_waits_for_a_begun_request_and_abort_wakes_it():
    q = make()
    q.begin("r1")
    got = []
    t = threading.Thread(target=lambda: got.append(q.pop("r1", timeout=10)))
    t.start()
    q.publish("r1", "prepared")
    t.join(10)
    assert got == ["prepared"]

    q.begin("r2")
    errors = []

    def waiter():
        try:
            q.pop("r2", timeout=10)
        except HandoffError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=waiter)
    t.start()
    q.abort("r2")
    t.join(10)
    assert not t.is_alive() and errors and "aborted" in errors[0]


def test_pop_of_a_pending_request_times_out_with_the_edge_error():
    q = make()
    q.begin("r1")
    with pytest.raises(HandoffError, match="process-local"):
        q.pop("r1", timeout=0.05)


def test_concurrent_producers_and_consumers_hand_over_every_request_exactly_once():
    q = make()
    n_threads, per_thread = 8, 200
    received: dict[str, object] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(2 * n_threads)

    # Requests are begun before any consumer can see them (preprocessing begins before the engine
    # receives the payload); publishing and popping then race freely.
    for t in range(n_threads):
        for i in range(per_thread):
            q.begin(f"{t}-{i}")

    def producer(t):
        barrier.wait()
        for i in range(per_thread):
            q.publish(f"{t}-{i}", (t, i))

    def consumer(t):
        barrier.wait()
        for i in range(per_thread):
            rid = f"{t}-{i}"
            value = q.pop(rid, timeout=30)
            with lock:
                assert rid not in received
                received[rid] = value

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(n_threads)]
    threads += [threading.Thread(target=consumer, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(received) == n_threads * per_thread
    assert all(received[f"{t}-{i}"] == (t, i) for t in range(n_threads) for i in range(per_thread))
    assert len(q) == 0


def test_aborted_memory_is_bounded():
    q = make()
    for i in range(q.GONE_MEMORY + 10):
        q.abort(f"r{i}")
    assert len(q._gone) == q.GONE_MEMORY


def test_unconsumed_slots_expire_on_the_next_begin():
    q = PreparedRequestQueue("moss_tts_delay", max_age_s=0.0)
    q.begin("old")
    q.publish("old", 1)
    q.begin("new")
    assert "old" not in q and "new" in q
    with pytest.raises(HandoffError, match="no prepared request for old \\(it expired after 0 s unconsumed\\)"):
        q.pop("old")
