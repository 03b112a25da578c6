"""Contracts declared in Python (PipelineConfig subclasses), read statically."""

from __future__ import annotations

from conftest import chain, pipeline_yaml, run_lint, write_tree

HANDOFF = """
_PREPARED: dict = {}


def build_preprocessing():
    def process(p):
        _PREPARED[p.request_id] = p.data
        return p
    return process


def build_tts_engine():
    return lambda p: _PREPARED.pop(p.request_id)
"""

CONFIG = '''
from omni_config import PipelineConfig, StageConfig
from pydantic import Field

from .names import PKG


def _stages():
    stages = [StageConfig(name="preprocessing", factory=f"{PKG}.stages:build_preprocessing", next=["tts_engine"])]
    stages.append(StageConfig(name="tts_engine", factory=PKG + ".stages:build_tts_engine", terminal=True))
    return stages


class MPipeline(PipelineConfig):
    stages: list[StageConfig] = Field(default_factory=_stages)

    @classmethod
    def process_local_edges(cls):
        return [("preprocessing", "tts_engine", "prepared requests stay in _PREPARED")]


class MSplitPipeline(MPipeline):
    @classmethod
    def process_local_edges(cls):
        return []
'''


def _tree(tmp_path, config=CONFIG, extra=None):
    files = {"m/__init__.py": "", "m/names.py": 'PKG = "m"\n', "m/stages.py": HANDOFF, "m/config.py": config, **(extra or {})}
    return write_tree(tmp_path, files)


def test_python_contract_variants_are_checked_like_pipeline_files(tmp_path):
    report = run_lint(_tree(tmp_path))
    # the base class declares the edge; the split variant overrides process_local_edges() without it
    assert [f.code for f in report.findings] == ["OL001"]
    message = report.findings[0].message
    assert "MSplitPipeline (m/config.py) does not tie preprocessing and tts_engine" in message
    assert "declare process_local_edges preprocessing -> tts_engine" in message
    assert report.pipelines == 2


def test_literal_stage_list_and_edge_records(tmp_path):
    config = '''
    from omni_config import PipelineConfig, ProcessLocalEdge, StageConfig

    BASE = "m.stages"


    class MPipeline(PipelineConfig):
        stages: list = [
            StageConfig(name="preprocessing", factory=f"{BASE}:build_preprocessing", next="tts_engine"),
            {"name": "tts_engine", "factory": BASE + ":build_tts_engine", "terminal": True},
        ]
        process_local_edges: list = [ProcessLocalEdge(src="preprocessing", dst="tts_engine", reason="in memory")]
    '''
    report = run_lint(_tree(tmp_path, config))
    assert report.findings == ()


def test_unevaluable_expression_is_a_finding_naming_it(tmp_path):
    config = '''
    import os
    from omni_config import PipelineConfig, StageConfig


    def _stages():
        return [StageConfig(name=n, factory=os.environ["F"]) for n in ("a", "b")]


    class MPipeline(PipelineConfig):
        stages: list = _stages()
    '''
    report = run_lint(_tree(tmp_path, config))
    assert [(f.path, f.code) for f in report.findings] == [("m/config.py", "OL005")]
    assert "MPipeline (m/config.py): cannot evaluate `[StageConfig(name=n, factory=os.environ[" in report.findings[0].message


def test_yaml_and_python_must_agree(tmp_path):
    stages = chain("m", ["preprocessing", "tts_engine"])
    extra = {"m/pipeline.yaml": pipeline_yaml("m", stages, [("preprocessing", "tts_engine", "in memory")])}
    only_base = CONFIG[: CONFIG.index("class MSplitPipeline")]
    assert run_lint(_tree(tmp_path, only_base, extra)).findings == ()

    changed = only_base.replace('"prepared requests stay in _PREPARED")', '"x"), ("tts_engine", "preprocessing", "y")')
    report = run_lint(_tree(tmp_path, changed, extra))
    codes = sorted(f.code for f in report.findings)
    assert "OL006" in codes
    (differs,) = [f for f in report.findings if f.code == "OL006"]
    assert "process-local edge tts_engine -> preprocessing declared only in the class" in differs.message


def test_variant_extends_the_base_edges_through_super(tmp_path):
    config = CONFIG.replace(
        '''class MSplitPipeline(MPipeline):
    @classmethod
    def process_local_edges(cls):
        return []''',
        '''class MExtendedPipeline(MPipeline):
    stages: list[StageConfig] = Field(default_factory=lambda: [*_stages(), StageConfig(name="vocoder", factory=f"{PKG}.stages:build_tts_engine", terminal=True)])

    @classmethod
    def process_local_edges(cls):
        return [*super().process_local_edges(), ("tts_engine", "vocoder", "same process")]''',
    )
    report = run_lint(_tree(tmp_path, config))
    # the base's edge arrives through super() (no OL001 for _PREPARED in the variant); the added edge
    # tts_engine -> vocoder is not a pipeline edge (tts_engine is terminal): OL004 at the method
    assert [(f.path, f.code) for f in report.findings] == [("m/config.py", "OL004")]
    assert "declared process-local edge tts_engine -> vocoder is not an edge of the pipeline" in report.findings[0].message
