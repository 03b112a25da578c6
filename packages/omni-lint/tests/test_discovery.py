"""Finding model folders and resolving factories against the right import root."""

from __future__ import annotations

from conftest import FIXTURES, HANDOFF, chain, pipeline_yaml, run_lint, write_tree

from omni_lint import Settings, lint
from omni_lint.discovery import discover, import_root


def test_variants_are_separate_contracts(tmp_path):
    stages = chain("m", ["preprocessing", "tts_engine"])
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/stages.py": HANDOFF,
            "m/pipeline.yaml": pipeline_yaml("m", stages, [("preprocessing", "tts_engine", "in memory")]),
            "m/pipeline_split.yaml": pipeline_yaml("m", stages),
            "m/pipeline-notes.yaml": "not: a pipeline\n",
        },
    )
    (folder,) = discover([tmp_path], lambda p: False)
    assert [p.name for p in folder.pipeline_files] == ["pipeline.yaml", "pipeline_split.yaml"]
    report = run_lint(tmp_path)
    assert [f.code for f in report.findings] == ["OL001"]
    assert "m/pipeline_split.yaml does not tie" in report.findings[0].message
    # a pipeline file given directly selects its model folder
    assert run_lint(tmp_path / "m" / "pipeline.yaml", cwd=tmp_path).exit_code == 1


def test_import_root_walks_up_through_packages():
    folder = FIXTURES / "prepared_queue" / "mosslike"
    assert import_root(folder) == (FIXTURES / "prepared_queue").resolve()


def test_namespace_packages_without_init(tmp_path):
    """models/tts/pipeline.yaml with factory tts.stages:...: no __init__.py anywhere."""
    write_tree(
        tmp_path,
        {
            "models/tts/stages.py": HANDOFF,
            "models/tts/pipeline.yaml": pipeline_yaml("tts", chain("tts", ["preprocessing", "tts_engine"])),
        },
    )
    report = run_lint(tmp_path / "models", cwd=tmp_path)
    assert [(f.path, f.code) for f in report.findings] == [("models/tts/stages.py", "OL001")]


def test_excluded_and_hidden_folders_are_not_searched(tmp_path):
    files = {"m/__init__.py": "", "m/stages.py": HANDOFF, "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"]))}
    write_tree(tmp_path / "src", files)
    write_tree(tmp_path / ".venv" / "lib", files)
    write_tree(tmp_path / "vendor", files)
    report = lint([tmp_path], Settings(base=tmp_path, exclude=("vendor",)), cwd=tmp_path)
    assert [f.path for f in report.findings] == ["src/m/stages.py"]
    assert report.models == 1


def test_instance_attribute_shadows_a_class_level_default(tmp_path):
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/pipeline.yaml": pipeline_yaml("m", chain("m", ["preprocessing", "tts_engine"])),
            "m/stages.py": """
                class Buffer:
                    items: list = []
                    def __init__(self):
                        self.items = []
                    def push(self, x):
                        self.items.append(x)
                    def first(self):
                        return self.items[0]
                def build_preprocessing():
                    b = Buffer()
                    return lambda p: b.push(p)
                def build_tts_engine():
                    b = Buffer()
                    return lambda p: b.first()
            """,
        },
    )
    assert run_lint(tmp_path).findings == ()
    # without the instance attribute, the class-level list is shared: a handoff
    stages = tmp_path / "m" / "stages.py"
    stages.write_text(stages.read_text().replace("    def __init__(self):\n        self.items = []\n", ""))
    report = run_lint(tmp_path)
    assert [f.code for f in report.findings] == ["OL001"]
    assert report.findings[0].message.startswith("Buffer.items ")


def test_factory_outside_the_tree_is_info(tmp_path):
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/stages.py": "def build_a():\n    return lambda p: p\n",
            "m/pipeline.yaml": "name: t/m\nstages:\n  - {name: a, factory: 'm.stages:build_a', next: b}\n  - {name: b, factory: 'othertool.stages:build', terminal: true}\n",
        },
    )
    report = run_lint(tmp_path)
    assert [(f.code, f.line) for f in report.findings] == [("OL101", 4)]
    assert report.exit_code == 0


def test_one_finding_per_state_and_stage_pair_across_variants(tmp_path):
    stages = chain("m", ["preprocessing", "tts_engine"])
    write_tree(
        tmp_path,
        {
            "m/__init__.py": "",
            "m/stages.py": HANDOFF,
            "m/pipeline.yaml": pipeline_yaml("m", stages),
            "m/pipeline_fast.yaml": pipeline_yaml("m", stages),
            "m/pipeline_split.yaml": pipeline_yaml("m", stages),
        },
    )
    report = run_lint(tmp_path)
    (finding,) = report.findings
    assert finding.code == "OL001"
    assert "but m/pipeline.yaml, m/pipeline_fast.yaml and m/pipeline_split.yaml do not tie preprocessing and tts_engine" in finding.message
