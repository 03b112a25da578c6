"""Contracts written the way serving frameworks write them (sglang-omni style): the class
in ``config.py`` on a base imported from the framework package, stages as a class attribute
with f-string factories over a module constant, ``EntryClass`` at the bottom and the handoff
state in a sibling module reached through the factories. Each form either gives the real
finding or says it cannot be read; never an empty clean run."""

from __future__ import annotations

import pytest
from conftest import codes, run_lint, write_tree

FRAMEWORK = {
    "fw/__init__.py": "",
    "fw/config/__init__.py": "from .base import PipelineConfig, StageConfig\n",
    "fw/config/base.py": """
        class StageConfig:
            def __init__(self, **kw):
                self.kw = kw


        class PipelineConfig:
            stages: list = []
        """,
}

STATE = """
_PREPARED_REQUESTS = {}


def put(rid, value):
    _PREPARED_REQUESTS[rid] = value


def take(rid):
    return _PREPARED_REQUESTS.pop(rid)
"""

STAGES = """
from . import state


def create_preprocessing_executor():
    def run(payload):
        state.put(payload.request_id, payload.data)
        return payload
    return run


def create_tts_engine_executor():
    def run(payload):
        return state.take(payload.request_id)
    return run
"""


def _config(base_import: str, base: str, edges: str = "") -> str:
    return f"""
from typing import ClassVar
{base_import}

_PKG = "fw.models.qwen"


class QwenTTSPipelineConfig({base}):
    architecture: ClassVar[str] = "Qwen3TTS"
    stages: list[StageConfig] = [
        StageConfig(name="preprocessing", factory=f"{{_PKG}}.stages.create_preprocessing_executor", next="tts_engine"),
        StageConfig(name="tts_engine", factory=f"{{_PKG}}.stages.create_tts_engine_executor", terminal=True),
    ]
{edges}

EntryClass = QwenTTSPipelineConfig
"""


def _tree(tmp_path, config: str, stages: str = STAGES, extra: dict | None = None):
    files = {**FRAMEWORK, "fw/models/__init__.py": "", "fw/models/qwen/__init__.py": "", "fw/models/qwen/config.py": config,
             "fw/models/qwen/state.py": STATE, "fw/models/qwen/stages.py": stages, **(extra or {})}
    write_tree(tmp_path, files)
    return run_lint(tmp_path / "fw" / "models", cwd=tmp_path)


@pytest.mark.parametrize(
    ("base_import", "base"),
    [
        ("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"),  # re-exported by the package
        ("from fw.config.base import PipelineConfig, StageConfig", "PipelineConfig"),  # where it is defined
        ("from fw.config import PipelineConfig as PC, StageConfig", "PC"),  # an alias
        ("import fw.config as C\nfrom fw.config import StageConfig", "C.PipelineConfig"),  # a module alias
    ],
)
def test_undeclared_handoff_in_a_framework_contract_is_ol001(tmp_path, base_import, base):
    report = _tree(tmp_path, _config(base_import, base))
    assert codes(report) == ["OL001"]
    assert "_PREPARED_REQUESTS" in report.findings[0].message and "QwenTTSPipelineConfig" in report.findings[0].message


def test_declared_edge_makes_it_clean(tmp_path):
    edges = """
    @classmethod
    def process_local_edges(cls):
        return [("preprocessing", "tts_engine", "prepared requests live in _PREPARED_REQUESTS")]
"""
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig", edges))
    assert report.errors == 0 and "OL001" not in codes(report)


def test_base_defined_in_another_module_of_the_model(tmp_path):
    config = _config("from .common import ModelBase\nfrom fw.config import StageConfig", "ModelBase")
    extra = {"fw/models/qwen/common.py": "from fw.config import PipelineConfig\n\n\nclass ModelBase(PipelineConfig):\n    pass\n"}
    assert codes(_tree(tmp_path, config, extra=extra)) == ["OL001"]


def test_framework_outside_the_tree_by_its_qualified_name(tmp_path):
    """The framework is installed, not in the linted tree: the base is named by where it is imported from."""
    config = _config("from sglang_omni.config import PipelineConfig as Base, StageConfig", "Base").replace("fw.models.qwen", "models.qwen")
    write_tree(tmp_path, {"models/__init__.py": "", "models/qwen/__init__.py": "", "models/qwen/config.py": config,
                          "models/qwen/state.py": STATE, "models/qwen/stages.py": STAGES})
    assert codes(run_lint(tmp_path / "models", cwd=tmp_path)) == ["OL001"]


def test_a_lookalike_that_cannot_be_resolved_is_an_error_naming_the_class(tmp_path):
    config = _config("from elsewhere import SomeBase\nfrom fw.config import StageConfig", "SomeBase")
    report = _tree(tmp_path, config)
    assert codes(report) == ["OL005"] and report.exit_code == 1
    message = report.findings[0].message
    assert "QwenTTSPipelineConfig" in message and "`SomeBase`" in message and "elsewhere.SomeBase" in message


@pytest.mark.parametrize(
    "reach",
    [
        'importlib.import_module("fw.models.qwen.state")',
        '__import__("fw.models.qwen.state", fromlist=["take"])',
        '__import__("fw.models.qwen.state").models.qwen.state',
        'sys.modules["fw.models.qwen.state"]',
        'sys.modules.get("fw.models.qwen.state")',
    ],
)
def test_dynamic_module_access_is_followed(tmp_path, reach):
    stages = STAGES.replace("from . import state", "import importlib\nimport sys").replace(
        "return state.take(payload.request_id)", f"return {reach}.take(payload.request_id)"
    ).replace("state.put(", 'importlib.import_module("fw.models.qwen.state").put(')
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"), stages)
    assert codes(report) == ["OL001"]


@pytest.mark.parametrize("reach", ["__import__(NAME)", "sys.modules[NAME]", "importlib.import_module(NAME)"])
def test_computed_dynamic_access_warns_and_fails_under_strict(tmp_path, cli, reach):
    stages = STAGES.replace("from . import state", "import importlib\nimport sys\n\nfrom . import state\n\nNAME = 'x'").replace(
        "return state.take(payload.request_id)", f"return {reach}.take(payload.request_id)"
    )
    edges = """
    @classmethod
    def process_local_edges(cls):
        return [("preprocessing", "tts_engine", "prepared requests")]
"""
    _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig", edges), stages)
    code, out, _ = cli("--no-cache", "fw/models", cwd=tmp_path)
    assert code == 0 and "OL102" in out
    code, out, err = cli("--no-cache", "--strict", "fw/models", cwd=tmp_path)
    assert code == 1 and "OL102" in out and "1 error" in err
    (tmp_path / "pyproject.toml").write_text("[tool.omni-lint]\nstrict = true\n")
    code, _, _ = cli("--no-cache", "fw/models", cwd=tmp_path)
    assert code == 1


def test_strict_setting_must_be_a_boolean(tmp_path, cli):
    write_tree(tmp_path, {"pyproject.toml": '[tool.omni-lint]\nstrict = "yes"\n'})
    code, _, err = cli("--no-cache", ".", cwd=tmp_path)
    assert code == 2 and "strict" in err and "true or false" in err


# -- shapes of real framework trees (sglang-omni 2026): decided, not refused ----------------------

def test_an_entry_class_that_is_a_torch_module_is_not_a_contract(tmp_path):
    """SGLang's model registry names the model class ``EntryClass`` too: an ``nn.Module`` is no contract."""
    model = "from torch import nn\n\n\nclass TalkerModel(nn.Module):\n    pass\n\n\nEntryClass = TalkerModel\n"
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"), extra={"fw/models/qwen/sglang_model.py": model})
    assert codes(report) == ["OL001"]


def test_an_entry_class_on_a_base_nobody_can_name_is_still_an_error(tmp_path):
    model = "from fw.util import make_base\n\n\nclass TalkerModel(make_base()):\n    pass\n\n\nEntryClass = TalkerModel\n"
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"),
                   extra={"fw/models/qwen/sglang_model.py": model, "fw/util.py": "def make_base():\n    return object\n"})
    assert sorted(codes(report)) == ["OL001", "OL005"]
    assert "TalkerModel" in next(f.message for f in report.findings if f.code == "OL005")


HELPER_CONFIG = """
from fw.config import PipelineConfig, StageConfig, StageResourceConfig, StageRuntimeConfig

_PKG = "fw.models.qwen"
_FRACTION = 0.9
_PROCESSES = {"preprocessing": "pipeline", "tts_engine": "pipeline"}


def _stages(*, colocated: bool, processes: dict, tp_size: int = 1):
    runtime = StageRuntimeConfig(resources=StageResourceConfig(total_gpu_memory_fraction=(_FRACTION if colocated else None)))
    engine_args = {"gpu_id": 0}
    if colocated:
        engine_args["reserve"] = 0.15
    for key in list(engine_args):
        engine_args[key] = str(engine_args[key])
    return [
        StageConfig(name="preprocessing", process=processes["preprocessing"], factory=f"{_PKG}.stages.create_preprocessing_executor",
                    runtime=StageRuntimeConfig(resources=StageResourceConfig(total_gpu_memory_fraction=0.03)), next="tts_engine"),
        StageConfig(name="tts_engine", process=processes["tts_engine"], factory=f"{_PKG}.stages.create_tts_engine_executor",
                    factory_args=engine_args, runtime=runtime, tp_size=tp_size,
                    next=[] if colocated else None, terminal=True),
    ]


class QwenTTSPipelineConfig(PipelineConfig):
    stages: list[StageConfig] = Field(default_factory=lambda: _stages(colocated=True, processes=_PROCESSES))


EntryClass = QwenTTSPipelineConfig
"""


def test_fields_the_contract_does_not_need_may_be_unreadable(tmp_path):
    """Resources, an ``IfExp`` fraction, a loop over factory_args, a defaulted ``int`` parameter: the
    stages, factories and edges are still read, so the real finding (the handoff) comes out."""
    config = "from pydantic import Field\n" + HELPER_CONFIG
    report = _tree(tmp_path, config)
    assert codes(report) == ["OL001"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('factory=f"{_PKG}.stages.create_tts_engine_executor"', 'factory=_PKG + runtime.factory'),  # a needed field
        ('next="tts_engine"', 'next=engine_args["gpu_id"]'),  # a needed field computed by an unreadable loop
    ],
)
def test_a_needed_field_that_cannot_be_read_is_still_ol005(tmp_path, old, new):
    config = "from pydantic import Field\n" + HELPER_CONFIG.replace(old, new)
    report = _tree(tmp_path, config)
    assert "OL005" in codes(report) and report.exit_code == 1


SPEAKER_CACHE = """
from threading import RLock


class Store:
    def __init__(self, limit):
        self.limit = limit
        self._items = {}

    def get(self, key):
        return self._items.get(key)

    def put(self, key, value):
        self._items[key] = value


class ArtifactCache:
    def __init__(self, limit=64):
        self._store = Store(limit)
        self._hits = 0
        self._misses = 0
        self._lock = RLock()

    def get(self, key):
        with self._lock:
            value = self._store.get(key)
            if value is None:
                self._misses += 1
                return None
            self._hits += 1
            return value

    def put(self, key, value):
        with self._lock:
            self._store.put(key, value)


_SHARED_CACHE = ArtifactCache()


def shared_cache():
    return _SHARED_CACHE
"""

CACHE_STAGES = """
from fw.sched.cache import shared_cache


def _load(payload):
    return [payload]


def create_preprocessing_executor():
    cache = shared_cache()

    def run(payload):
        key = payload.get("voice")
        waveform = None
        if key is not None:
            hit = cache.get(key)
            if hit is not None:
                waveform, tag = hit
                waveform = list(waveform)
        if waveform is None:
            waveform = _load(payload)
            if key is not None:
                cache.put(key, (waveform, "waveform"))
        return {"waveform": waveform}

    return run


def create_tts_engine_executor():
    cache = shared_cache()

    def run(payload):
        key = payload.get("voice")
        if key is not None:
            found = cache.get(key)
        else:
            found = None
        if found is not None:
            rows = list(found)
        else:
            rows = _load(payload)
            if key is not None:
                cache.put(key, rows)
        return {"rows": rows}

    return run
"""


def test_a_get_or_compute_cache_behind_an_accessor_is_a_cache(tmp_path):
    """Each stage looks its own artifact up, recomputes on a miss (tested through a variable unpacked
    from the hit) and fills the shared LRU: no stage needs what another stored."""
    extra = {"fw/sched/__init__.py": "", "fw/sched/cache.py": SPEAKER_CACHE}
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"), CACHE_STAGES, extra)
    assert codes(report) == [] and report.exit_code == 0


def test_a_stage_that_only_reads_the_cache_is_still_a_handoff(tmp_path):
    reader = CACHE_STAGES[: CACHE_STAGES.index("def create_tts_engine_executor")] + """def create_tts_engine_executor():
    cache = shared_cache()

    def run(payload):
        return {"rows": cache.get(payload.get("voice"))}

    return run
"""
    extra = {"fw/sched/__init__.py": "", "fw/sched/cache.py": SPEAKER_CACHE}
    report = _tree(tmp_path, _config("from fw.config import PipelineConfig, StageConfig", "PipelineConfig"), reader, extra)
    assert codes(report) == ["OL001"] and "_SHARED_CACHE" in report.findings[0].message
