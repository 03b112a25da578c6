"""Every file under the repository's configs/ compiles, except the *.invalid.yaml ones, which exit 1.

The checks run through the CLI exactly as CI runs them. Skipped when the package is
tested outside the monorepo checkout.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
FILES = sorted(CONFIGS.glob("*.yaml")) if CONFIGS.is_dir() else []


@pytest.mark.skipif(not FILES, reason="no configs/ directory in this checkout")
@pytest.mark.parametrize("path", FILES, ids=[f.name for f in FILES])
def test_repository_config(cli, path):
    code, out, err = cli("validate", path)
    if path.name.endswith(".invalid.yaml"):
        assert code == 1, out
        assert err.startswith(("1 error", f"{err.split()[0]} errors"))
        assert "  rule: " in err and "  fix:  " in err
    else:
        assert code == 0, err
        assert out.splitlines()[0].split(" : ")[0].strip()


@pytest.mark.skipif(not (CONFIGS / "higgs_tts.yaml").is_file(), reason="no configs/higgs_tts.yaml")
def test_repository_higgs_matches_the_spec_table(cli):
    code, out, _ = cli("show", CONFIGS / "higgs_tts.yaml")
    assert code == 0
    assert out.startswith("tts_frontend : preprocessing, audio_encoder\npipeline     : tts_engine\nvocoder      : vocoder\n")
