"""Parity session: collects each variant's measured row and prints the table at the end."""

from __future__ import annotations

import json
import os
from pathlib import Path

ROWS: list[dict] = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001 - pytest's hook signature
    if not ROWS:
        return
    terminalreporter.write_sep("=", "Qwen3-TTS 12 Hz parity against qwen-tts 0.1.1 (float32, CPU)")
    header = "| model | variant | cases | codes equal (alone) | codes equal (batch of 8) | waveform max error | streamed max error at chunk boundaries |"
    terminalreporter.write_line(header)
    terminalreporter.write_line("|---|---|---|---|---|---|---|")
    for r in ROWS:
        terminalreporter.write_line(
            f"| {r['model']} | {r['variant']} | {r['cases']} | {r['alone']} | {r['batch']} | {r['wave_max_error']:.2e} | {r['stream_boundary_error']:.2e} |"
        )
    out = os.environ.get("OMNI_PARITY_REPORT")
    if out:
        Path(out).write_text(json.dumps(ROWS, indent=2), encoding="utf-8")
