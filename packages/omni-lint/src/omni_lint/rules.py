"""Every rule omni-lint can report, with a stable code and its own explanation.

Codes never change meaning once released: suppression comments, ``select`` and
``ignore`` settings and CI annotations refer to them. ``omni-lint --explain
CODE`` prints the explanation with a wrong and a right example.
"""

from __future__ import annotations

from dataclasses import dataclass

from .findings import Severity


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    summary: str
    explanation: str
    invalid: str = ""
    valid: str = ""

    def explain(self) -> str:
        parts = [f"{self.code} {self.name} ({self.severity.value})", "", self.summary, "", self.explanation.strip()]
        if self.invalid:
            parts += ["", "Reported:", "", _indent(self.invalid)]
        if self.valid:
            parts += ["", "Accepted:", "", _indent(self.valid)]
        return "\n".join(parts) + "\n"


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.strip("\n").splitlines())


_HANDOFF_INVALID = """
# stages.py
_PREPARED_REQUESTS: dict[str, dict] = {}

def build_preprocessing():
    def process(payload):
        _PREPARED_REQUESTS[payload.request_id] = prepare(payload.data)   # write
        return payload
    return process

def build_tts_engine():
    def process(payload):
        prepared = _PREPARED_REQUESTS.pop(payload.request_id)            # read
        ...
    return process

# pipeline.yaml: preprocessing -> tts_engine, no process_local_edges
"""

_HANDOFF_VALID = """
# pipeline.yaml
process_local_edges:
  - src: preprocessing
    dst: tts_engine
    reason: prepared requests live in _PREPARED_REQUESTS, read in-process by the engine

# or: carry the prepared request in StagePayload.data and delete the module state
"""

RULES: dict[str, Rule] = {
    rule.code: rule
    for rule in (
        Rule(
            "OL001",
            "undeclared-handoff",
            Severity.ERROR,
            "Module state written by one stage and read by another, with no declared process-local edge tying them.",
            """
A stage that leaves state in module memory (a dict, a queue, a registry
instance, a global sentinel) for another stage to read only works while both
stages share one OS process. Placement is an operator's choice
(`StageConfig.process`), so the model must declare the handoff in
`process_local_edges`; the compiler then rejects every split that would break
it. Declared edges tie stages together transitively, so the handoff is safe
when the writer and the reader are connected through declared edges. The
message names the state (with the line that defines it), the writer and reader
stages and the edge(s) to declare. Fix: declare the edges, or move the state
into the payload (StagePayload.data) so the stages can be split. When both
stages run exactly the same accesses (a shared helper that writes and reads the
state itself, such as a re-entrancy flag or a memo), each uses the state on its
own and nothing is handed over, so it is not reported.
""",
            _HANDOFF_INVALID,
            _HANDOFF_VALID,
        ),
        Rule(
            "OL002",
            "state-must-move-into-payload",
            Severity.ERROR,
            "Module state handed between two stages that no pipeline path joins.",
            """
The writer and the reader of a module-level state are not joined by any
pipeline path (next, stream_to, wait_for) in either direction, for example two
branches of a fan-out. A process-local edge can only be declared on a pipeline
edge, so no declaration can make this handoff safe, and nothing orders the
write before the read. Fix: carry the value in StagePayload.data (through the
stage that joins the branches) and delete the module state.
""",
            """
# a -> b, a -> c; b writes _SHARED, c reads it
""",
            """
# b returns the value in payload.data; a merge stage (wait_for: [b, c]) combines them
""",
        ),
        Rule(
            "OL003",
            "unresolved-factory",
            Severity.ERROR,
            "A stage's factory, merge_fn or route_fn does not resolve to a function or class in the analysed tree.",
            """
The pipeline file names a dotted path whose top-level package lies under the
import root, but the module or the attribute does not exist there. The runtime
would fail to import it, and the linter cannot check the stage's state. Fix the
dotted path (`pkg.module:function` or `pkg.module.function`).
""",
            "factory: omni_models.qwen3_tts.stages:build_engin",
            "factory: omni_models.qwen3_tts.stages:build_tts_engine",
        ),
        Rule(
            "OL004",
            "declared-edge-not-in-pipeline",
            Severity.ERROR,
            "A process_local_edges entry names an unknown stage or an edge the pipeline does not have.",
            """
A declared process-local edge must be an edge of the pipeline (a `next`,
`stream_to` or `wait_for` connection). A typo must not silently disable the
guard, so an entry that matches nothing is an error. Fix the stage names, or
remove the entry.
""",
            "process_local_edges: [{src: preprocesing, dst: tts_engine, reason: ...}]",
            "process_local_edges: [{src: preprocessing, dst: tts_engine, reason: ...}]",
        ),
        Rule(
            "OL005",
            "python-contract-unreadable",
            Severity.ERROR,
            "A value of a Python contract (a PipelineConfig subclass) that omni-lint cannot compute statically.",
            """
omni-lint reads contracts written in Python without importing them: literals,
module constants (also imported ones), f-strings and `+` of those, lists and
tuples, `StageConfig(...)` / `ProcessLocalEdge(...)` calls, straight-line helper
functions, `Field(default=...)` / `Field(default_factory=...)`, and
`process_local_edges()` methods (also through `super()`). Anything else (a loop,
a value read from a file or the environment) would leave the contract unchecked,
so the expression is named here instead of passing silently. Fix: write the
value in one of those forms, or keep the contract in pipeline YAML.
""",
            "stages = Field(default_factory=lambda: load_stages_from_disk())",
            "stages: list[StageConfig] = Field(default_factory=_stages)   # _stages returns a list literal",
        ),
        Rule(
            "OL006",
            "contracts-disagree",
            Severity.ERROR,
            "A model folder's Python contract and its pipeline YAML say different things.",
            """
When a model folder declares its pipeline both as a PipelineConfig subclass and
as pipeline YAML, the two must agree on the stages (names, factories, merge_fn,
route_fn), the pipeline edges and the declared process-local edges: the runtime
loads one of them, and a checked file that differs from the loaded one proves
nothing. The message lists every difference against the closest pipeline file.
""",
        ),
        Rule(
            "OL102",
            "reachability-incomplete",
            Severity.WARNING,
            "A call on a stage's path that the analysis cannot follow, so it cannot prove a declared edge unneeded.",
            """
A dynamic import (`importlib.import_module(name)` with a computed name) or a
`getattr(module, name)` with a computed name may reach code holding module
state. The stage's reachability is then incomplete: omni-lint still reports
every handoff it sees, but it no longer advises removing declared edges that
look unbacked (OL100), because the handoff may sit behind that call.
""",
        ),
        Rule(
            "OL103",
            "missing-module",
            Severity.WARNING,
            "An import names a module of the analysed tree that does not exist.",
            """
The top-level package of the import lies in the analysed tree, but the module
is not there. The runtime would fail to import it (or an optional import falls
back), and any state it holds is invisible to the analysis. Fix the import, or
suppress the warning with a reason where the fallback is deliberate.
""",
        ),
        Rule(
            "OL100",
            "declared-edge-without-state",
            Severity.INFO,
            "A declared process-local edge that no module state in the code needs.",
            """
No module-level state written by one side of this edge and read by the other
was found, so the stages could run in separate processes as far as the code
shows. That is legitimate for a compatibility guard (keeping a previously
supported topology surface) or a placement reason the code cannot show (a
device the stage uses directly); the message repeats the declared reason so a
reviewer can judge. Information only: it never fails the run.
""",
            """
process_local_edges:
  - {src: preprocessing, dst: tts_generation, reason: compatibility guard preserving the previous allowlist}
""",
        ),
        Rule(
            "OL101",
            "factory-outside-tree",
            Severity.INFO,
            "A stage's factory lives outside the analysed tree, so its state accesses are not checked.",
            """
The factory's top-level package is not under the model's import root (for
example a stage provided by an installed library). omni-lint never imports
code, so it cannot follow it. Information only.
""",
        ),
        Rule(
            "OL800",
            "malformed-suppression",
            Severity.ERROR,
            "A suppression comment that does not name a known code and a reason.",
            """
Suppressions have the form `# omni-lint: ignore[CODE] reason` (several codes
separated by commas). A bare `# omni-lint: ignore`, an empty or unknown code,
or a missing reason would hide findings nobody can review, so it suppresses
nothing and is itself reported.
""",
            "_QUEUE = PreparedRequestQueue()  # omni-lint: ignore",
            "_QUEUE = PreparedRequestQueue()  # omni-lint: ignore[OL001] drained by a sidecar in the same process",
        ),
        Rule(
            "OL801",
            "unused-suppression",
            Severity.INFO,
            "A suppression comment that suppressed nothing in this run.",
            """
The finding it was written for is gone (or the code is not reached by any
linted pipeline). Remove the comment so it cannot hide a future finding.
Information only.
""",
        ),
        Rule(
            "OL900",
            "parse-error",
            Severity.ERROR,
            "A Python module of a model could not be parsed.",
            """
omni-lint parses every module of a model folder and every module a stage
reaches. A file that cannot be read or parsed cannot be checked, so its stages'
state accesses are unknown. Besides syntax errors and undecodable text (the
PEP 263 coding cookie is honoured), omni-lint refuses, with this finding:
anything but a regular file (a FIFO, a device), a file over 2 MiB, a symlink
loop, brackets nested deeper than CPython allows (200), and operator chains
so long that parsing would take minutes. Fix the file, or exclude it.
""",
        ),
        Rule(
            "OL901",
            "pipeline-load-error",
            Severity.ERROR,
            "A pipeline file that omni-config cannot load.",
            """
The pipeline file (pipeline.yaml or pipeline_<variant>.yaml) is read with
omni-config exactly as the runtime reads it. When it is not valid YAML or does
not satisfy the schema, the config error (path, value, rule and fix) is
reported here, and the model's code is not checked against it.
""",
        ),
    )
}


RULES = dict(sorted(RULES.items()))
