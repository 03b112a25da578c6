"""The words of the ``omni`` command line: --model (and its deprecated alias --model-path),
--device, -o and its suffix, --version."""

from __future__ import annotations

from importlib.metadata import version

import pytest
import torch

import omni_runtime
from omni_runtime import cli
from omni_runtime.cli import output
from omni_runtime.cli.selection import DEPRECATED_MODEL_PATH
from omni_runtime.serving.audio import AUDIO_FORMATS

from .conftest import PIPELINE, run_omni

pytestmark = pytest.mark.timeout(300)

#: What the first bytes of each container look like (a file is what its suffix says).
MAGIC = {
    ".wav": (b"RIFF",),
    ".flac": (b"fLaC",),
    ".mp3": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    ".opus": (b"OggS",),
    ".aac": (b"\xff\xf1", b"\xff\xf9"),
}


def _main(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"omni {omni_runtime.__version__}" == f"omni {version('omni-runtime')}"


def test_model_path_is_a_deprecated_alias_of_model(capsys):
    new = _main(["topology", "--model", str(PIPELINE)], capsys)
    old = _main(["topology", "--model-path", str(PIPELINE)], capsys)
    assert new[0] == old[0] == 0
    assert new[1] == old[1] and new[1].startswith("frontend : frontend")
    assert DEPRECATED_MODEL_PATH in old[2] and "deprecated" not in new[2]


def test_model_and_model_path_together_is_a_user_error(capsys):
    code, _, err = _main(["topology", "--model", str(PIPELINE), "--model-path", str(PIPELINE)], capsys)
    assert code == 1 and "give the pipeline once" in err and "fix:  drop --model-path" in err


def test_unknown_model_names_the_installed_ones(capsys):
    code, _, err = _main(["topology", "--model", "nobody/nothing"], capsys)
    assert code == 1 and "nobody/nothing" in err and "Traceback" not in err  # a user mistake


@pytest.mark.parametrize("suffix", sorted(MAGIC))
def test_output_is_what_its_suffix_says_or_refused(suffix, tmp_path):
    out = tmp_path / f"speech{suffix}"
    result = run_omni("synthesize", "Suffix test.", "-o", str(out), "--config", str(PIPELINE), "--device", "cpu")
    fmt = output.SUFFIX_FORMATS[suffix]
    if fmt in AUDIO_FORMATS:
        assert result.returncode == 0, result.stderr
        assert out.read_bytes().startswith(MAGIC[suffix]), out.read_bytes()[:8]
        assert f"({fmt}," in result.stdout
    else:
        assert result.returncode == 1, result.stderr
        assert f"cannot encode {fmt}" in result.stderr and "Traceback" not in result.stderr
        assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-o", "speech.txt"], "the suffix '.txt' names no audio format"),
        (["-o", "speech.wav", "--format", "flac"], "the suffix '.wav' says wav, --format says flac"),
    ],
)
def test_output_suffix_mistakes_exit_1_before_anything_starts(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(["synthesize", "hello", *args, "--config", str(PIPELINE)], capsys)
    assert code == 1 and message in err
    assert not list(tmp_path.iterdir())


def test_gpu_pipeline_runs_on_the_cpu_with_one_line_when_torch_sees_no_cuda(tmp_path):
    """The default device: the declared GPU when torch sees CUDA, else the CPU, never a traceback."""
    out = tmp_path / "gpu.wav"
    result = run_omni("synthesize", "On whatever device.", "-o", str(out), "--config", str(PIPELINE), "--stages.vocoder.gpu", "0")
    assert result.returncode == 0, result.stderr
    notice = "omni: torch sees no CUDA device; running every stage on the CPU"
    assert (notice in result.stderr) is not torch.cuda.is_available()
    assert "Traceback" not in result.stderr and out.read_bytes().startswith(b"RIFF")


def test_device_cuda_without_cuda_is_a_user_error(capsys, tmp_path):
    argv = ["synthesize", "hello", "-o", str(tmp_path / "cuda.wav"), "--config", str(PIPELINE), "--stages.vocoder.gpu", "0", "--device", "cuda"]
    if torch.cuda.is_available():  # then the same command must run: covered on GPU machines
        result = run_omni(*argv)
        assert result.returncode == 0, result.stderr
        return
    code, _, err = _main(argv, capsys)
    assert code == 1 and "--device cuda" in err and "sees no CUDA device" in err and "fix:  --device cpu" in err
