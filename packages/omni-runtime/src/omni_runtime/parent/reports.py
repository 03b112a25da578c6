"""What the workers said about their stages at ready, and the questions the parent answers from it.

The parent never imports a stage module (that would load the model's code, and
torch, into the server process). Each worker reports, with its ``ready``
message (``omni_runtime.worker.facts``), what only its stages know: the preset
voices, the request limits a stage declares, and which stages take input
appended to a running request. This one object keeps those reports and answers
from them, so the runtime, the server and the receive loop share one reading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omni_compiler.topology import CompiledTopology

from ..errors import RequestFailed


@dataclass(eq=False)
class StageReports:
    """Per-stage facts from the workers' ``ready`` reports (empty until the first worker is ready)."""

    voices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """``VOICES`` of each stage's factory module."""
    limits: dict[str, dict[str, int]] = field(default_factory=dict)
    """``REQUEST_LIMITS`` each stage declared (``max_input_chars``, ``sample_rate``)."""
    appendable: set[str] = field(default_factory=set)
    """Stages whose stage object has an ``append`` hook (input appended to a running request)."""

    def take(self, report: dict[str, Any]) -> None:
        """Fold one worker's ``ready`` report in; anything malformed is left out (the stage still checks its own requests)."""
        voices = report.get("voices")
        if isinstance(voices, dict):
            self.voices.update({str(k): tuple(str(v) for v in vs) for k, vs in voices.items() if isinstance(vs, list)})
        appendable = report.get("append")
        if isinstance(appendable, list):
            self.appendable.update(str(s) for s in appendable)
        limits = report.get("limits")
        if isinstance(limits, dict):
            self.limits.update(
                {str(k): {str(n): v for n, v in d.items() if type(v) is int} for k, d in limits.items() if isinstance(d, dict)}
            )

    def model_voices(self, topology: CompiledTopology) -> tuple[str, ...]:
        """The entry stage's voices, else those of the first stage that lists some."""
        entry = topology.entry_stage
        for stage in [entry, *(s.name for s in topology.stages if s.name != entry)]:
            if stage in self.voices:
                return self.voices[stage]
        return ()

    def check_input(self, stage: str, data: Any) -> None:
        """Refuse, without a round trip to a worker, a text over the ``max_input_chars`` ``stage`` declared."""
        most = self.limits.get(stage, {}).get("max_input_chars")
        text = data.get("text") if isinstance(data, dict) else None
        if most is not None and isinstance(text, str) and len(text) > most:
            exc = RequestFailed(
                f"input is {len(text)} characters; this model accepts at most {most} (its {stage} stage declares "
                "max_input_chars); split the text into shorter requests",
                stage=stage,
                kind="invalid_request",
            )
            exc.param = "input"
            raise exc
