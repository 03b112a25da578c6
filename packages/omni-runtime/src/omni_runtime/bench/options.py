"""The command line of ``omni bench``: options, alternatives, and the checks done before any process starts."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path

CURRENT = "current"
#: Figure formats matplotlib writes without extra software.
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


class BenchUsageError(Exception):
    """A mistake in the bench's own options; printed without a traceback, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Alternative:
    """A named topology: the current one, or the current one plus an override set."""

    name: str
    overrides: tuple[str, ...]


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,8, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,8, got {text!r}")
    return values


def _rate_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected request rates per second like 0.5,1,2, got {text!r}") from None
    if not values or any(not v > 0 or v == float("inf") for v in values):
        raise argparse.ArgumentTypeError(f"expected positive request rates per second like 0.5,1,2, got {text!r}")
    return values


def _alternative(text: str) -> Alternative:
    name, sep, overrides = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f'--alt {text!r}: expected NAME="--stages.STAGE.process NAME ...", e.g. --alt split="--stages.vocoder.process vocoder"'
        )
    try:
        tokens = shlex.split(overrides)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--alt {name}: cannot split {overrides!r}: {exc}") from None
    return Alternative(name=name, overrides=tuple(tokens))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``omni bench`` options (dotted overrides are split off by the ``omni`` CLI)."""
    from ..cli.args import add_backend_args
    from ..cli.selection import add_pipeline_arguments

    add_pipeline_arguments(parser)  # --model, --config, --weights, --device, --gpus: the words every omni command shares
    parser.add_argument("--requests", type=int, default=16, metavar="N", help="measured requests per topology and concurrency (default: %(default)s)")
    parser.add_argument(
        "--concurrency", type=_int_list, action="append", metavar="C",
        help="requests in flight at once; repeatable or a list like 1,8,32 (default: 1)",
    )
    parser.add_argument(
        "--rate", "--rates", dest="rate", type=_rate_list, action="append", metavar="R",
        help="open loop: requests arrive at R per second on average (seeded Poisson arrivals) whatever is in flight; "
        "repeatable or a list like 0.5,1,2 (a sweep). The client plays every stream in real time from its first chunk and counts underruns",
    )
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="runs of every row; the table shows the median run and the spread (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the open-loop arrival times (run k uses seed + k; default: %(default)s)")
    parser.add_argument(
        "--max-rate", action="store_true",
        help="search the highest open-loop rate served with zero underruns and p95 TTFA within --ttfa-bound-ms: "
        "double from --max-rate-start until a rate fails (a start that fails is halved up to twice), then bisect --max-rate-steps times",
    )
    parser.add_argument("--ttfa-bound-ms", type=float, default=1000.0, metavar="MS", help="p95 TTFA a rate must stay within for --max-rate (default: %(default)s)")
    parser.add_argument("--max-rate-start", type=float, default=0.5, metavar="R", help="first rate --max-rate tries (default: %(default)s)")
    parser.add_argument("--max-rate-limit", type=float, default=64.0, metavar="R", help="highest rate --max-rate tries (default: %(default)s)")
    parser.add_argument("--max-rate-steps", type=int, default=3, metavar="N", help="bisection steps of --max-rate after the doubling (default: %(default)s)")
    parser.add_argument(
        "--max-rate-window", type=float, default=10.0, metavar="S",
        help="each --max-rate probe sends max(--requests, rate x S) requests, so a rate is held for S seconds, not met by one burst (default: %(default)s)",
    )
    parser.add_argument(
        "--text-length", type=_int_list, action="append", metavar="CHARS",
        help="characters of text per request; repeatable or a list like 80,400 (default: 200)",
    )
    parser.add_argument("--voice", default=None, help="voice of every request (a checkpoint with named speakers needs one; default: the model's own)")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True, help="stream audio chunks to the client (default: on)")
    parser.add_argument("--warmup", type=int, default=1, metavar="N", help="unmeasured requests before each row, sent at the row's concurrency (default: %(default)s)")
    parser.add_argument(
        "--alt", type=_alternative, action="append", default=[], metavar='NAME="OVERRIDES"',
        help='an alternative topology: override set applied on top of the current one, e.g. --alt split="--stages.vocoder.process vocoder" (repeatable)',
    )
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds every process gets to build its stages (default: %(default)s)")
    parser.add_argument("--request-timeout", type=float, default=600.0, help="seconds one request may take before it counts as failed (default: %(default)s)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: %(default)s)")
    parser.add_argument("--json", dest="format", action="store_const", const="json", help="print the rows as JSON (same as --format json)")
    parser.add_argument(
        "--plot", metavar="FILE.png", default=None,
        help="also draw throughput and TTFA against concurrency (closed loop) and TTFA p50/p95 and underruns against offered rate "
        "(open loop), one line per topology, into FILE (.png, .svg or .pdf; needs omni-runtime[plot])",
    )
    add_backend_args(parser)


def check_options(args: argparse.Namespace) -> None:
    """Every usage mistake at once, before anything starts (a plot that could not be written
    would otherwise be found only after the whole run)."""
    problems = []
    for option, value, low in (("--requests", args.requests, 1), ("--warmup", args.warmup, 0), ("--repeat", args.repeat, 1), ("--max-rate-steps", args.max_rate_steps, 0)):
        if value < low:
            problems.append(f"error: {option} {value}\n  rule: must be at least {low}\n  fix:  pass {option} {max(low, 1)}")
    for option, value in (("--ttfa-bound-ms", args.ttfa_bound_ms), ("--max-rate-start", args.max_rate_start), ("--max-rate-limit", args.max_rate_limit), ("--max-rate-window", args.max_rate_window)):
        if not value > 0:
            problems.append(f"error: {option} {value}\n  rule: must be a positive number\n  fix:  pass e.g. {option} 1")
    if args.plot:
        path = Path(args.plot)
        if path.suffix.lower() not in PLOT_SUFFIXES:
            problems.append(f"error: --plot {args.plot}\n  rule: the figure is written as {', '.join(PLOT_SUFFIXES)}\n  fix:  name the file e.g. {path.with_suffix('.png')}")
        elif not path.resolve().parent.is_dir():
            problems.append(f"error: --plot {args.plot}\n  rule: its folder must exist\n  fix:  create {path.resolve().parent} or choose another path")
        else:
            try:
                import matplotlib  # noqa: F401 - only whether it imports
            except ImportError:
                problems.append(f"error: --plot needs matplotlib, which is not installed\n  rule: plotting is an optional extra of omni-runtime\n  fix:  {plot_install_command()}")
    if problems:
        raise BenchUsageError("\n".join(problems))


def alternatives(args: argparse.Namespace) -> list[Alternative]:
    found = [Alternative(CURRENT, ())]
    for alt in args.alt:
        if alt.name in {a.name for a in found}:
            raise BenchUsageError(
                f"error: --alt {alt.name}\n  rule: every alternative needs its own name ('{CURRENT}' is the topology without --alt)\n"
                f"  fix:  rename it, e.g. --alt {alt.name}2=..."
            )
        found.append(alt)
    return found


def flatten(groups: list[list[int]] | None, default: list[int]) -> list[int]:
    if not groups:
        return default
    return list(dict.fromkeys(v for group in groups for v in group))


def plot_install_command() -> str:
    """A command that installs the plot extra here: from this source tree when omni-runtime runs from a clone
    (it is not on a package index), else matplotlib itself."""
    from pathlib import Path

    import omni_runtime

    source = Path(omni_runtime.__file__).resolve().parents[2]  # packages/omni-runtime in a clone
    if (source / "pyproject.toml").is_file():
        return f"pip install -e '{source}[plot]'"
    return "pip install 'matplotlib>=3.7'"
