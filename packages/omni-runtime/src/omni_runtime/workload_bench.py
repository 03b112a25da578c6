"""``omni bench``: measure a workload on the current topology and on alternatives, side by side.

The spec asks operators to "measure the target workload before making a topology
change persistent". This command does exactly that: it compiles the current
topology (model + deployment file + dotted overrides) and every ``--alt NAME="..."``
override set applied on top of it, rejects any invalid one before starting
anything, then starts each topology in turn with the real runtime and drives the
same deterministic requests through it at each concurrency level.

Reported per topology and concurrency: requests per second, time to first audio
chunk (p50/p95; without ``--stream`` the client gets audio only when the request
completes, so it is the full latency), the real-time factor as *audio seconds
produced per wall-clock second* (higher is better; above 1 is faster than real
time), and the peak resident memory (RSS) of every OS process of the topology.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

CURRENT = "current"
_TEXT_POOL = (
    "The quick brown fox jumps over the lazy dog near the quiet river bank.",
    "Streaming speech lets a listener hear the first words while the rest is still being made.",
    "Every stage of the pipeline can share a process or run in its own, as the deployment declares.",
    "Measure the target workload before making a topology change persistent.",
    "A warm cup of tea on a cold morning makes the whole day feel a little brighter.",
    "The engineers compared two layouts and kept the one that answered faster under load.",
    "Numbers such as 42 and 3.5 are spelled out before the text reaches the synthesiser.",
    "She sells sea shells by the sea shore, and the shells she sells are surely sea shells.",
)


class BenchUsageError(Exception):
    """A mistake in the bench's own options; printed without a traceback, exit 1."""

    exit_code = 1


@dataclass(frozen=True)
class Alternative:
    """A named topology: the current one, or the current one plus an override set."""

    name: str
    overrides: tuple[str, ...]


@dataclass(frozen=True)
class RequestSample:
    ok: bool
    latency_s: float
    first_audio_s: float | None
    audio_s: float
    error: str | None = None


@dataclass(frozen=True)
class Row:
    """One line of the table: a topology at one concurrency and text length."""

    topology: str
    processes: int
    concurrency: int
    text_chars: int
    requests: int
    failed: int
    wall_s: float
    requests_per_s: float
    ttfa_p50_s: float | None
    ttfa_p95_s: float | None
    audio_s: float
    realtime_factor: float
    """Audio seconds produced per wall-clock second (higher is better)."""
    startup_s: float
    rss_mib: dict[str, float] = field(default_factory=dict)
    """Peak resident memory of each OS process (instance name -> MiB) while this row ran."""
    first_error: str | None = None


# -- arguments ----------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.replace(" ", "").split(",") if part]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers like 1,8, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers like 1,8, got {text!r}")
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
    parser.add_argument("--config", metavar="FILE", help="pipeline file, or deployment file with 'extends:'")
    parser.add_argument("--model-path", metavar="ID", help="registered model id or pipeline file (default: omni/espeak)")
    parser.add_argument("--requests", type=int, default=16, metavar="N", help="measured requests per topology and concurrency (default: %(default)s)")
    parser.add_argument(
        "--concurrency",
        type=_int_list,
        action="append",
        metavar="C",
        help="requests in flight at once; repeatable or a list like 1,8 (default: 1)",
    )
    parser.add_argument(
        "--text-length",
        type=_int_list,
        action="append",
        metavar="CHARS",
        help="characters of text per request; repeatable or a list like 80,400 (default: 200)",
    )
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True, help="stream audio chunks to the client (default: on)")
    parser.add_argument("--warmup", type=int, default=1, metavar="N", help="unmeasured requests before each row (default: %(default)s)")
    parser.add_argument(
        "--alt",
        type=_alternative,
        action="append",
        default=[],
        metavar='NAME="OVERRIDES"',
        help='an alternative topology: override set applied on top of the current one, e.g. --alt split="--stages.vocoder.process vocoder" (repeatable)',
    )
    parser.add_argument("--device", default=None, help="'cpu' runs GPU-declared stages on the CPU (default: the declared placement)")
    parser.add_argument("--gpus", type=int, default=None, help="number of GPUs to check GPU ids against")
    parser.add_argument("--startup-timeout", type=float, default=300.0, help="seconds every process gets to build its stages (default: %(default)s)")
    parser.add_argument("--request-timeout", type=float, default=600.0, help="seconds one request may take before it counts as failed (default: %(default)s)")
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: %(default)s)")
    from .cli import add_backend_args

    add_backend_args(parser)


# -- workload -------------------------------------------------------------------


def workload_text(length: int, index: int) -> str:
    """Deterministic English text of about ``length`` characters; varies with ``index``."""
    words: list[str] = []
    size = 0
    k = index
    while size < length:
        for word in _TEXT_POOL[k % len(_TEXT_POOL)].split():
            if size >= length:
                break
            words.append(word)
            size += len(word) + 1
        k += 1
    text = " ".join(words).rstrip(",.;")
    return text + "."


def _audio_seconds(chunk: Any) -> float:
    if not isinstance(chunk, dict) or "audio" not in chunk or not chunk.get("sample_rate"):
        return 0.0
    audio = chunk["audio"]
    frames = audio.shape[-1] if hasattr(audio, "shape") and len(audio.shape) else 0
    return frames / float(chunk["sample_rate"])


async def _one_request(runtime: Any, data: dict[str, Any], stream: bool, timeout: float) -> RequestSample:
    began = time.perf_counter()
    first: float | None = None
    audio_s = 0.0
    handle = None
    try:
        handle = await runtime.submit(data)

        async def drain() -> dict[str, Any]:
            nonlocal first, audio_s
            async for chunk in handle.stream():
                seconds = _audio_seconds(chunk)
                if first is None and seconds > 0:
                    first = time.perf_counter() - began
                audio_s += seconds
            return await handle.result()

        result = await asyncio.wait_for(drain(), timeout)
        if audio_s == 0.0:
            audio_s = _audio_seconds(result)
            first = time.perf_counter() - began if audio_s else None
    except Exception as exc:  # noqa: BLE001 - a failed request is a data point, not a crash of the benchmark
        if handle is not None and isinstance(exc, asyncio.TimeoutError):
            await handle.cancel()
        message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return RequestSample(ok=False, latency_s=time.perf_counter() - began, first_audio_s=None, audio_s=0.0, error=message)
    latency = time.perf_counter() - began
    # Without streaming, the client holds no audio until the response is complete.
    ttfa = first if stream else latency
    return RequestSample(ok=True, latency_s=latency, first_audio_s=ttfa, audio_s=audio_s)


async def _drive(runtime: Any, payloads: list[dict[str, Any]], concurrency: int, stream: bool, timeout: float) -> tuple[list[RequestSample], float]:
    pending = iter(payloads)
    samples: list[RequestSample] = []

    async def worker() -> None:
        for data in pending:
            samples.append(await _one_request(runtime, data, stream, timeout))

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples, time.perf_counter() - began


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in [0, 100]); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class _RssSampler:
    """Peak RSS of each worker process, sampled in the background while a row runs."""

    def __init__(self, pids: dict[str, int | None], interval: float = 0.2) -> None:
        import psutil

        self._procs = {}
        for name, pid in pids.items():
            if pid is None:
                continue
            try:
                self._procs[name] = psutil.Process(pid)
            except psutil.Error:
                continue
        self.peak: dict[str, int] = {name: 0 for name in self._procs}
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        import psutil

        for name, proc in self._procs.items():
            try:
                self.peak[name] = max(self.peak[name], proc.memory_info().rss)
            except psutil.Error:
                continue

    async def _loop(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self._interval)

    def __enter__(self) -> _RssSampler:  # noqa: PYI034 - Python 3.10 has no typing.Self
        self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.sample()

    def mib(self) -> dict[str, float]:
        return {name: round(value / 2**20, 1) for name, value in self.peak.items()}


# -- topologies -------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    alternative: Alternative
    topology: Any


def _compile_all(args: argparse.Namespace, alternatives: Sequence[Alternative]) -> list[_Target]:
    """Compile every topology first, so an invalid alternative fails before anything starts."""
    from omni_compiler import compile as compile_topology
    from omni_config import ConfigError, ConfigIssue, load_config, load_model, split_overrides

    base = list(getattr(args, "overrides", ()) or ())
    targets: list[_Target] = []
    issues: list[Any] = []
    for alt in alternatives:
        rest, extra = split_overrides(list(alt.overrides))
        if rest:
            raise BenchUsageError(
                f"error: --alt {alt.name}: {' '.join(rest)!r} is not an override\n"
                f"  rule: an alternative is a set of dotted overrides such as --stages.vocoder.process vocoder\n"
                f'  fix:  write --alt {alt.name}="--stages.STAGE.process NAME ..."'
            )
        overrides = base + extra
        try:
            if args.config:
                config = load_config(args.config, overrides)
            else:
                config = load_model(args.model_path or "omni/espeak", overrides)
            targets.append(_Target(alt, compile_topology(config, num_gpus=args.gpus)))
        except ConfigError as exc:
            label = "the current topology" if alt.name == CURRENT else f"--alt {alt.name}"
            issues.extend(ConfigIssue(f"{label}: {i.path}", i.rule, i.fix, value=i.value, source=i.source) for i in exc.issues)
    if issues:
        raise ConfigError(issues)
    return targets


def _alternatives(args: argparse.Namespace) -> list[Alternative]:
    alternatives = [Alternative(CURRENT, ())]
    for alt in args.alt:
        if alt.name in {a.name for a in alternatives}:
            raise BenchUsageError(
                f"error: --alt {alt.name}\n  rule: every alternative needs its own name ('{CURRENT}' is the topology without --alt)\n"
                f"  fix:  rename it, e.g. --alt {alt.name}2=..."
            )
        alternatives.append(alt)
    return alternatives


# -- running ------------------------------------------------------------------------


def _flatten(groups: list[list[int]] | None, default: list[int]) -> list[int]:
    if not groups:
        return default
    return list(dict.fromkeys(v for group in groups for v in group))


def _validate(args: argparse.Namespace) -> None:
    for option, value, low in (("--requests", args.requests, 1), ("--warmup", args.warmup, 0)):
        if value < low:
            raise BenchUsageError(f"error: {option} {value}\n  rule: must be at least {low}\n  fix:  pass {option} {max(low, 1)}")


async def _bench_topology(target: _Target, args: argparse.Namespace, concurrencies: list[int], lengths: list[int], log: Callable[[str], None]) -> list[Row]:
    from omni_runtime import Runtime

    from .cli import backend_kwargs

    runtime = Runtime(
        target.topology,
        device=args.device,
        startup_timeout=args.startup_timeout,
        model_path=args.model_path,
        log=None,
        **backend_kwargs(args),
    )
    name = target.alternative.name
    log(f"bench: starting {name} ({len(target.topology.instances)} processes)")
    began = time.perf_counter()
    rows: list[Row] = []
    try:
        await runtime.start()
        startup = time.perf_counter() - began
        pids = runtime.instance_pids()
        for length in lengths:
            for concurrency in concurrencies:

                def payload(i: int, length: int = length) -> dict[str, Any]:
                    return {"text": workload_text(length, i), "voice": None, "speed": 1.0, "response_format": "pcm", "stream": bool(args.stream)}

                warm = [payload(i) for i in range(args.warmup)]
                if warm:
                    await _drive(runtime, warm, min(concurrency, len(warm)), args.stream, args.request_timeout)
                payloads = [payload(i) for i in range(args.requests)]
                with _RssSampler(pids) as rss:
                    samples, wall = await _drive(runtime, payloads, concurrency, args.stream, args.request_timeout)
                rows.append(_row(name, target, concurrency, length, samples, wall, startup, rss.mib()))
                log(f"bench: {name} c={concurrency} chars={length}: {rows[-1].requests_per_s:.2f} req/s")
    finally:
        await runtime.shutdown()
    return rows


def _row(name: str, target: _Target, concurrency: int, length: int, samples: list[RequestSample], wall: float, startup: float, rss: dict[str, float]) -> Row:
    ok = [s for s in samples if s.ok]
    ttfa = [s.first_audio_s for s in ok if s.first_audio_s is not None]
    audio = sum(s.audio_s for s in ok)
    errors = [s.error for s in samples if not s.ok]
    return Row(
        topology=name,
        processes=len(target.topology.instances),
        concurrency=concurrency,
        text_chars=length,
        requests=len(samples),
        failed=len(errors),
        wall_s=round(wall, 4),
        requests_per_s=round(len(ok) / wall, 4) if wall > 0 else 0.0,
        ttfa_p50_s=percentile(ttfa, 50),
        ttfa_p95_s=percentile(ttfa, 95),
        audio_s=round(audio, 3),
        realtime_factor=round(audio / wall, 4) if wall > 0 else 0.0,
        startup_s=round(startup, 2),
        rss_mib=rss,
        first_error=errors[0] if errors else None,
    )


async def run_async(args: argparse.Namespace, log: Callable[[str], None]) -> list[Row]:
    _validate(args)
    alternatives = _alternatives(args)
    targets = _compile_all(args, alternatives)
    concurrencies = _flatten(args.concurrency, [1])
    lengths = _flatten(args.text_length, [200])
    rows: list[Row] = []
    for target in targets:
        rows.extend(await _bench_topology(target, args, concurrencies, lengths, log))
    return rows


# -- output ---------------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def _ratio(value: float, base: float | None) -> str:
    if base is None or base <= 0:
        return "-"
    return f"{value / base:.2f}x"


def render_table(rows: Sequence[Row], *, title: str = "") -> str:
    """Aligned text table; ratios compare each row with the current topology at the same load."""
    base = {(r.concurrency, r.text_chars): r.requests_per_s for r in rows if r.topology == CURRENT}
    header = ["topology", "procs", "conc", "chars", "ok/n", "req/s", "vs current", "TTFA p50 ms", "TTFA p95 ms", "RTF (audio s/s)", "RSS MiB per process"]
    body = []
    for r in rows:
        rss = " ".join(f"{k}={v:.0f}" for k, v in r.rss_mib.items())
        body.append(
            [
                r.topology,
                str(r.processes),
                str(r.concurrency),
                str(r.text_chars),
                f"{r.requests - r.failed}/{r.requests}",
                f"{r.requests_per_s:.2f}",
                _ratio(r.requests_per_s, base.get((r.concurrency, r.text_chars))),
                _ms(r.ttfa_p50_s),
                _ms(r.ttfa_p95_s),
                f"{r.realtime_factor:.2f}",
                f"{rss} (total {sum(r.rss_mib.values()):.0f})",
            ]
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in body)
    lines.append("RTF = audio seconds produced per wall-clock second (higher is better, > 1 is faster than real time).")
    lines.append("TTFA = time from submit to the first audio chunk (without --stream: to the complete response).")
    failures = [r for r in rows if r.first_error]
    for r in failures:
        lines.append(f"failed requests in {r.topology} c={r.concurrency}: {r.failed}; first: {r.first_error}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``omni bench`` (registered by ``omni_runtime.cli``)."""
    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        rows = asyncio.run(run_async(args, log))
    except BenchUsageError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    model = args.config or args.model_path or "omni/espeak"
    if args.format == "json":
        print(json.dumps({"model": model, "stream": bool(args.stream), "device": args.device, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        title = (
            f"omni bench: {model}, {args.requests} requests per row, {'streaming' if args.stream else 'non-streaming'}, device {args.device or 'as declared'}"
        )
        print(render_table(rows, title=title))
    # Every request failing is a tool failure (a broken pipeline), not a usage mistake.
    return 2 if rows and all(r.failed == r.requests for r in rows) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m omni_runtime.workload_bench``: the same command without the ``omni`` front end."""
    from omni_config import ConfigError, ConfigFileError, split_overrides

    from .errors import StartupError

    rest, overrides = split_overrides(list(sys.argv[1:] if argv is None else argv))
    parser = argparse.ArgumentParser(prog="omni bench", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(rest)
    args.overrides = overrides
    try:
        return run(args)
    except (ConfigError, ConfigFileError) as exc:
        print(exc.render() if isinstance(exc, ConfigError) else str(exc), file=sys.stderr)
        return int(getattr(exc, "exit_code", 1))
    except StartupError as exc:
        print("error: " + exc.render(), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
