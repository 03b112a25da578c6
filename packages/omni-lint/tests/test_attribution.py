"""Stage attribution and access classification, one small model per pattern.

Every case is a two-stage model (preprocessing -> tts_engine) with no declared
edge: a detected handoff is exactly one OL001 naming the state; a pattern that
must not count gives a clean run.
"""

from __future__ import annotations

import pytest
from conftest import chain, pipeline_yaml, run_lint, write_tree

PIPE = pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]))


def _lint(tmp_path, files):
    write_tree(tmp_path, {"m/__init__.py": "", "m/pipeline.yaml": PIPE, **files})
    return run_lint(tmp_path)


HANDOFFS = {
    "subscript store / pop": {
        "m/stages.py": """
            _S: dict[str, int] = {}
            def build_preprocessing():
                def process(p):
                    _S[p.request_id] = 1
                    return p
                return process
            def build_tts_engine():
                return lambda p: _S.pop(p.request_id)
        """,
    },
    "absolute module import, attribute call, setdefault().append": {
        "m/state.py": "from collections import defaultdict\nBUCKETS = defaultdict(list)\n",
        "m/stages.py": """
            import m.state
            def build_preprocessing():
                def process(p):
                    m.state.BUCKETS.setdefault(p.request_id, []).append(p)
                return process
            def build_tts_engine():
                def process(p):
                    for item in m.state.BUCKETS[p.request_id]:
                        print(item)
                return process
        """,
    },
    "relative import with alias, helper function, del / iteration": {
        "m/helpers.py": """
            import collections
            ORDER = collections.OrderedDict()
            def remember(key, value):
                ORDER[key] = value
            def forget(key):
                del ORDER[key]
        """,
        "m/stages.py": """
            from .helpers import remember as keep
            from . import helpers as h
            def build_preprocessing():
                return lambda p: keep(p.request_id, p)
            def build_tts_engine():
                def process(p):
                    return [k for k in h.ORDER]
                return process
        """,
    },
    "function-local import and Queue put/get": {
        "m/q.py": "import queue\nJOBS: queue.Queue = queue.Queue()\n",
        "m/stages.py": """
            def build_preprocessing():
                def process(p):
                    from .q import JOBS
                    JOBS.put(p)
                return process
            def build_tts_engine():
                from . import q
                def process(p):
                    return q.JOBS.get(timeout=1)
                return process
        """,
    },
    "callback passed as an argument and functools.partial": {
        "m/stages.py": """
            import functools
            import threading
            _READY = set()
            def _mark(request_id):
                _READY.add(request_id)
            def _check(request_id, strict):
                return request_id in _READY
            def build_preprocessing():
                def process(p):
                    threading.Thread(target=_mark, args=(p.request_id,)).start()
                return process
            def build_tts_engine():
                return functools.partial(_check, strict=True)
        """,
    },
    "accessor function and local alias": {
        "m/stages.py": """
            _PENDING: list = []
            def pending():
                return _PENDING
            def build_preprocessing():
                def process(p):
                    pending().append(p)
                return process
            def build_tts_engine():
                def process(p):
                    queue = _PENDING
                    return queue[0]
                return process
        """,
    },
    "template method: base class calls a hook the subclass overrides, super() call": {
        "m/base.py": """
            class Stage:
                def process(self, payload):
                    self.before(payload)
                    return payload
                def before(self, payload):
                    pass
            class Loader:
                def load(self):
                    pass
        """,
        "m/stages.py": """
            from .base import Loader, Stage
            _LOADED = {}
            class FrontLoader(Loader):
                def load(self):
                    _LOADED["weights"] = 1
            class Engine(Stage):
                def before(self, payload):
                    super().before(payload)
                    payload.data["w"] = _LOADED["weights"]
            def build_preprocessing():
                loader = FrontLoader()
                loader.load()
                return lambda p: p
            def build_tts_engine():
                return Engine()
        """,
    },
    "registry instance with in-tree methods, class in a helper package": {
        "lib/__init__.py": "",
        "lib/registry.py": """
            class Registry:
                def __init__(self):
                    self._items = {}
                def put(self, key, value):
                    self._items[key] = value
                def take(self, key):
                    return self._items.pop(key)
        """,
        "m/stages.py": """
            from lib.registry import Registry
            _REG = Registry()
            def build_preprocessing():
                return lambda p: _REG.put(p.request_id, p)
            def build_tts_engine():
                return lambda p: _REG.take(p.request_id)
        """,
    },
    "install-once global guarded by a None check is still a handoff": {
        "m/stages.py": """
            _ENGINE = None
            def install(engine):
                global _ENGINE
                if _ENGINE is None:
                    _ENGINE = engine
            def build_preprocessing():
                install(object())
                return lambda p: p
            def build_tts_engine():
                return lambda p: _ENGINE
        """,
    },
    "registry method that rebinds its own attribute is a write": {
        "m/stages.py": """
            class Table:
                def __init__(self):
                    self.rows = []
                def replace(self, rows):
                    self.rows = list(rows)
                def first(self):
                    return self.rows[0]
            TABLE = Table()
            def build_preprocessing():
                return lambda p: TABLE.replace([p])
            def build_tts_engine():
                return lambda p: TABLE.first()
        """,
    },
    "sentinel rebound through global, annotated": {
        "m/stages.py": """
            from typing import Optional
            _MODEL: Optional[object] = None
            def build_preprocessing():
                global _MODEL
                _MODEL = object()
                return lambda p: p
            def build_tts_engine():
                def process(p):
                    if _MODEL is None:
                        raise RuntimeError("split")
                    return p
                return process
        """,
    },
    "class-level registry through cls and the class name": {
        "m/stages.py": """
            class Voices:
                table: dict = {}
                @classmethod
                def add(cls, name, vec):
                    cls.table[name] = vec
            def build_preprocessing():
                return lambda p: Voices.add("a", [1.0])
            def build_tts_engine():
                return lambda p: Voices.table.get("a")
        """,
    },
    "state kept on self and a bound method passed as a callback": {
        "m/stages.py": """
            import queue
            _JOBS = queue.Queue()
            def _publish_all(items, sink):
                for item in items:
                    sink(item)
            class Consumer:
                def __init__(self):
                    self.jobs = _JOBS
                def process(self, p):
                    return self.jobs.get()
            def build_preprocessing():
                return lambda p: _publish_all([p], sink=_JOBS.put)
            def build_tts_engine():
                return Consumer()
        """,
    },
    "state injected into constructors and helpers of the tree": {
        "m/workers.py": """
            class Producer:
                def __init__(self, sink, limit=8):
                    self.sink = sink
                    self.limit = limit
                def process(self, p):
                    self.sink.append(p)
                    return p
            def drain(buffer, n=1):
                return [buffer.pop() for _ in range(n)]
        """,
        "m/stages.py": """
            from collections import deque
            from .workers import Producer, drain
            _BUFFER = deque()
            def build_preprocessing():
                return Producer(_BUFFER, limit=4)
            def build_tts_engine():
                return lambda p: drain(n=1, buffer=_BUFFER)
        """,
    },
    "registry instance injected into stage classes, methods with their own verbs": {
        "m/registry.py": """
            class Mailbox:
                def __init__(self):
                    self._slots = {}
                def stash(self, key, value):
                    self._slots[key] = value
                def claim(self, key):
                    return self._slots.pop(key)
        """,
        "m/stages.py": """
            from .registry import Mailbox
            MAILBOX = Mailbox()
            class Front:
                def __init__(self, box):
                    self.box = box
                def process(self, p):
                    self.box.stash(p.request_id, p)
                    return p
            class Engine:
                def __init__(self, box):
                    self.box = box
                def process(self, p):
                    return self.box.claim(p.request_id)
            def build_preprocessing():
                return Front(MAILBOX)
            def build_tts_engine():
                return Engine(box=MAILBOX)
        """,
    },
    "star import of a state module": {
        "m/shared.py": "__all__ = ['TABLE']\nTABLE = {}\n",
        "m/stages.py": """
            from .shared import *
            def build_preprocessing():
                def process(p):
                    TABLE[p.request_id] = p
                return process
            def build_tts_engine():
                return lambda p: TABLE.get(p.request_id)
        """,
    },
    "factory given as pkg.mod.fn and a class factory": {
        "m/stages.py": """
            _BUF = []
            def build_preprocessing():
                return lambda p: _BUF.extend([p])
            class build_tts_engine:
                def process(self, p):
                    return len(_BUF)
        """,
    },
}


@pytest.mark.parametrize("name", sorted(HANDOFFS))
def test_handoff_pattern_is_detected(tmp_path, name):
    report = _lint(tmp_path, HANDOFFS[name])
    assert [f.code for f in report.findings] == ["OL001"], [f.render() for f in report.findings]
    message = report.findings[0].message
    assert "written by stage preprocessing" in message and "read by stage tts_engine" in message
    assert "declare process_local_edges preprocessing -> tts_engine" in message


@pytest.mark.parametrize("name", sorted(HANDOFFS))
def test_declaring_the_edge_makes_the_pattern_clean(tmp_path, name):
    files = dict(HANDOFFS[name])
    files["m/pipeline.yaml"] = pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]), [("preprocessing", "tts_engine", "handoff in memory")])
    write_tree(tmp_path, {"m/__init__.py": "", **files})
    report = run_lint(tmp_path)
    assert report.findings == ()


NOT_HANDOFFS = {
    "get-or-load with setdefault and try/except": """
        _A = {}
        _B = {}
        def codec(name):
            return _A.setdefault(name, object())
        def vocab(name):
            try:
                return _B[name]
            except KeyError:
                value = _B[name] = object()
                return value
        def build_preprocessing():
            return lambda p: (codec("x"), vocab("y"))
        def build_tts_engine():
            return lambda p: (codec("x"), vocab("y"))
    """,
    "functools.cache loader": """
        import functools
        @functools.cache
        def table():
            return {"a": 1}
        def build_preprocessing():
            return lambda p: table()
        def build_tts_engine():
            return lambda p: table()["a"]
    """,
    "state written only by code no stage reaches": """
        _S = {}
        def unused_writer():
            _S["x"] = 1
        def build_preprocessing():
            return lambda p: p
        def build_tts_engine():
            return lambda p: _S.get("x")
    """,
    "a class named only in an annotation is not instantiated": """
        _S = {}
        class Publisher:
            def publish(self, key):
                _S[key] = 1
            def peek(self, key):
                return _S[key]
        def build_preprocessing():
            pub = Publisher()
            def process(p):
                pub.publish(p.request_id)
                return pub.peek(p.request_id)
            return process
        def build_tts_engine():
            def process(p):
                holder: Publisher | None = None
                return holder
            return process
    """,
    "a read-only table passed to a helper in both stages": """
        ABBREVIATIONS = {"dr": "doctor"}
        def expand(text, table):
            return " ".join(table.get(word, word) for word in text.split())
        def build_preprocessing():
            return lambda p: expand(p.data["text"], ABBREVIATIONS)
        def build_tts_engine():
            return lambda p: expand(p.data["text"], table=ABBREVIATIONS)
    """,
    "a local that aliased a state and is rebound is not the state": """
        _DEFAULTS = {"speed": 1.0}
        def _settings(overrides):
            merged = _DEFAULTS
            merged = dict(merged)
            merged.update(overrides)
            return merged
        def build_preprocessing():
            return lambda p: _settings(p.data)
        def build_tts_engine():
            return lambda p: _DEFAULTS["speed"]
    """,
    "a global initialised lazily on first use": """
        import re
        _PATTERN = None
        def _split(text):
            global _PATTERN
            if _PATTERN is None:
                _PATTERN = re.compile(r"\\s+")
            return _PATTERN.split(text)
        def build_preprocessing():
            return lambda p: _split(p.data["text"])
        def build_tts_engine():
            return lambda p: _split(p.data["text"])
    """,
    "a shared helper that writes and reads its own flag in both stages": """
        _LOADING = False
        _PLUGINS = []
        def plugins():
            global _LOADING
            if _LOADING:
                return ()
            _LOADING = True
            try:
                _PLUGINS.append(len(_PLUGINS))
                return list(_PLUGINS)
            finally:
                _LOADING = False
        def build_preprocessing():
            return lambda p: plugins()
        def build_tts_engine():
            return lambda p: plugins()
    """,
    "state written and read by the same stage": """
        _S = {}
        def build_preprocessing():
            def process(p):
                _S[p.request_id] = p
                return _S.pop(p.request_id)
            return process
        def build_tts_engine():
            return lambda p: p
    """,
    "instance of a class outside the tree, shadowing local, module-level fill": """
        import threading
        _LOCAL = threading.local()
        _S = {}
        _S["default"] = 1
        def build_preprocessing():
            def process(p):
                _S = {}
                _S["x"] = 1
                _LOCAL.value = p
                return p
            return process
        def build_tts_engine():
            return lambda p: (_S["default"], getattr(_LOCAL, "value", None))
    """,
}


@pytest.mark.parametrize("name", sorted(NOT_HANDOFFS))
def test_not_a_handoff(tmp_path, name):
    report = _lint(tmp_path, {"m/stages.py": NOT_HANDOFFS[name]})
    assert report.findings == (), [f.render() for f in report.findings]


def test_declared_edges_tie_stages_transitively(tmp_path):
    stages = """
        _S = {}
        def build_a():
            return lambda p: _S.update(x=1)
        def build_b():
            return lambda p: p
        def build_c():
            return lambda p: _S["x"]
    """
    names = ["a", "b", "c"]
    write_tree(tmp_path, {"m/__init__.py": "", "m/stages.py": stages})
    (tmp_path / "m/pipeline.yaml").write_text(pipeline_yaml("m", chain("m", names), [("a", "b", "r1"), ("b", "c", "r2")]))
    assert run_lint(tmp_path).findings == ()
    (tmp_path / "m/pipeline.yaml").write_text(pipeline_yaml("m", chain("m", names), [("a", "b", "r1")]))
    # sorted by path: m/pipeline.yaml (OL100 for a -> b, not enough on its own) before m/stages.py
    info, finding = run_lint(tmp_path).findings
    assert (info.code, finding.code) == ("OL100", "OL001")
    # only the missing edge of the path a -> b -> c is asked for
    assert "declare process_local_edges b -> c (edge to add)" in finding.message
