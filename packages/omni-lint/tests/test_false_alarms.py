"""Two real shapes that are not handoffs: a get-or-compute cache behind methods, and a context
every stage's factory sets for its own process. Each with the variant that is a handoff."""

from __future__ import annotations

from conftest import chain, codes, pipeline_yaml, run_lint, write_tree

PIPE = pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]))

CACHE = """
class ArtifactCache:
    '''Counts hits and misses; each stage stores its own kind of artifact under (kind, key).'''

    def __init__(self):
        self._items = {}
        self.hits = 0
        self.misses = 0

    def get(self, kind, key):
        value = self._items.get((kind, key))
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, kind, key, value):
        self._items[(kind, key)] = value


ARTIFACTS = ArtifactCache()
"""

GET_OR_COMPUTE = """
from .cache import ARTIFACTS


def build_preprocessing():
    def process(p):
        speaker = ARTIFACTS.get("speaker", p.voice)
        if speaker is None:
            speaker = [ord(c) for c in p.voice]
            ARTIFACTS.put("speaker", p.voice, speaker)
        p.data["speaker"] = speaker
        return p
    return process


def build_tts_engine():
    def process(p):
        codec = ARTIFACTS.get("codec", p.model)
        if codec is None:
            codec = {"model": p.model}
            ARTIFACTS.put("codec", p.model, codec)
        return codec
    return process
"""


def _lint(tmp_path, files):
    write_tree(tmp_path, {"m/__init__.py": "", "m/pipeline.yaml": PIPE, **files})
    return run_lint(tmp_path)


def test_get_or_compute_cache_behind_methods_is_not_a_handoff(tmp_path):
    assert _lint(tmp_path, {"m/cache.py": CACHE, "m/stages.py": GET_OR_COMPUTE}).findings == ()


def test_a_stage_that_only_reads_what_another_computed_is_a_handoff(tmp_path):
    reads_only = GET_OR_COMPUTE.replace(
        '''        codec = ARTIFACTS.get("codec", p.model)
        if codec is None:
            codec = {"model": p.model}
            ARTIFACTS.put("codec", p.model, codec)
        return codec''',
        '''        return ARTIFACTS.get("speaker", p.voice)''',
    )
    report = _lint(tmp_path, {"m/cache.py": CACHE, "m/stages.py": reads_only})
    assert [f.code for f in report.findings] == ["OL001"]
    assert "written by stage preprocessing" in report.findings[0].message


CONTEXT = """
class ProcessContext:
    def __init__(self):
        self.device = None
        self.vocab = None

    def configure(self, device, vocab):
        self.device = device
        self.vocab = vocab


CONTEXT = ProcessContext()


def build_preprocessing(device="cpu"):
    CONTEXT.configure(device, {"a": 1})
    def process(p):
        p.data["ids"] = [CONTEXT.vocab.get(c, 0) for c in p.data["text"]]
        return p
    return process


def build_tts_engine(device="cpu"):
    CONTEXT.configure(device, {"a": 1})
    return lambda p: (CONTEXT.device, p)
"""


def test_context_set_by_every_stage_factory_is_not_a_handoff(tmp_path):
    assert _lint(tmp_path, {"m/stages.py": CONTEXT}).findings == ()


def test_context_set_by_one_factory_and_read_by_another_stage_is_a_handoff(tmp_path):
    one_sided = CONTEXT.replace('''def build_tts_engine(device="cpu"):
    CONTEXT.configure(device, {"a": 1})
''', '''def build_tts_engine(device="cpu"):
''')
    report = _lint(tmp_path, {"m/stages.py": one_sided})
    assert [f.code for f in report.findings] == ["OL001"]
    assert "CONTEXT (m/stages.py:11) is written by stage preprocessing (m/stages.py:15)" in report.findings[0].message


_CACHE_MODULE = """
from pathlib import Path


class SpeakerArtefacts:
    '''Get-or-compute: a miss loads the artefacts from the voices folder, so no reader depends on a writer.'''

    def __init__(self, folder, max_bytes=1 << 20):
        self._items = {}
        self._folder = Path(folder)
        self._max_bytes = max_bytes

    def get(self, key):
        found = self._items.get(key)
        if found is None:
            found = (self._folder / key).read_bytes()[: self._max_bytes]
            self._items[key] = found
        return found

    def put(self, key, value):
        (self._folder / key).write_bytes(value)
        self._items[key] = value


class PreparedRegistry:
    '''A real handoff: the reader takes what the writer stored and has no way to rebuild it.'''

    def __init__(self, limit=64):
        self._items = {}
        self._limit = limit

    def put(self, key, value):
        if len(self._items) < self._limit:
            self._items[key] = value

    def take(self, key):
        return self._items.pop(key)


SPEAKERS = SpeakerArtefacts("/var/voices")
PREPARED = PreparedRegistry()
"""

_CACHE_STAGES = """
from .cache import PREPARED, SPEAKERS


def build_audio_encoder():
    def process(payload):
        OBJECT.put(payload.request_id, payload.data)
        return payload
    return process


def build_tts_engine():
    def process(payload):
        return OBJECT.VERB(payload.request_id)
    return process
"""


def test_a_get_or_compute_cache_object_shared_by_two_stages_is_not_a_handoff(tmp_path):
    """The speaker-artefact cache: one stage stores, another reads through a method that loads on a
    miss (and reads its own configuration, a folder and a byte bound): no handoff."""
    stages = _CACHE_STAGES.replace("OBJECT", "SPEAKERS").replace("VERB", "get")
    write_tree(tmp_path, {"m/__init__.py": "", "m/cache.py": _CACHE_MODULE, "m/stages.py": stages,
                          "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["audio_encoder", "tts_engine"]))})
    assert codes(run_lint(tmp_path)) == []


def test_a_registry_object_with_configuration_is_still_a_handoff(tmp_path):
    stages = _CACHE_STAGES.replace("OBJECT", "PREPARED").replace("VERB", "take")
    write_tree(tmp_path, {"m/__init__.py": "", "m/cache.py": _CACHE_MODULE, "m/stages.py": stages,
                          "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["audio_encoder", "tts_engine"]))})
    report = run_lint(tmp_path)
    assert codes(report) == ["OL001"] and "PREPARED" in report.findings[0].message
