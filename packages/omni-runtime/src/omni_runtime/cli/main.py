"""``omni``: serve a pipeline over HTTP, synthesize one utterance, show the topology.

Every subcommand resolves the pipeline the same way (``--config FILE``, else
``--model ID|FILE``, else the espeak reference pipeline; ``--weights DIR`` for a
checkpoint; see :mod:`omni_runtime.cli.selection`), applies dotted overrides
(``--stages.vocoder.process vocoder``) and compiles once, so what ``omni
topology`` prints is exactly what ``omni serve`` spawns.

Exit codes (see :mod:`.cli_errors`): 0 success; 1 a mistake the user fixes
(a flag or OMNI_* variable, a config file, an unknown model or voice, a port,
an output path); 2 a failure (a stage that fails to start or to run, invalid
audio, out of memory).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .args import add_backend_args, backend_kwargs, nonnegative_float, positive_float, positive_int
from .errors import known_error_exit, known_error_text
from .output import SUFFIX_FORMATS, output_format, stdout_reserved, write_atomic
from .selection import DEFAULT_MODEL, Pipeline, UserError, add_pipeline_arguments, load_pipeline

_OVERRIDES_HELP = """\
pipeline overrides (any flag with a dot in its name):
  --stages.NAME.FIELD VALUE       e.g. --stages.vocoder.process vocoder
  --stages.NAME.runtime.resources.total_gpu_memory_fraction 0.1
  --processes.P.num_replicas 2    --processes.P.replica_devices 1,2
  --placement.FIELD VALUE         --a.b=VALUE works too
  --processes.P.ray.resources.node_b 1   (placement with --backend ray)
"""


def main(argv: Sequence[str] | None = None) -> int:
    from omni_config import split_overrides

    argv = list(sys.argv[1:] if argv is None else argv)
    rest, overrides = split_overrides(argv)
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(rest)
        if unknown and getattr(args, "func", None) is not _bench_missing:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse exits 2 on a usage error; for omni every user mistake is 1
        if exc.code == 2:
            return 1
        raise
    args.overrides = overrides
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return 1
    if getattr(args, "log_level", None):
        from .. import logs

        logs.configure(args.log_level, getattr(args, "log_format", "text"))
    try:
        return int(args.func(args) or 0)
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("omni: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `omni topology | head`: the reader left; not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except BaseException as exc:  # config, startup, bind and user errors: a message, never a traceback
        code = known_error_exit(exc)
        if code is None:
            raise
        print(known_error_text(exc), file=sys.stderr)
        return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omni",
        description="Run an omni TTS pipeline: serve it over an OpenAI-compatible HTTP API, "
        "synthesize one utterance, or show its process topology.",
        epilog=_OVERRIDES_HELP + f"\nWith neither --config nor --model the {DEFAULT_MODEL} reference pipeline is used.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND")

    from ..launch.local import DEFAULT_WORKER_NICE
    from ..serving.gate import DEFAULT_MAX_INFLIGHT

    serve = _subparser(sub, "serve", "serve the pipeline over HTTP (POST /v1/audio/speech, /v1/models, /health, /metrics)")
    _runtime_args(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, local only)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port; 0 picks a free one (default: %(default)s)")
    serve.add_argument(
        "--served-model-name",
        action="append",
        metavar="NAME",
        help="model id clients send in 'model' (repeatable; default: --model, else the pipeline name)",
    )
    serve.add_argument("--max-input-chars", type=positive_int, default=4096, help="longest accepted 'input'; longer is a 413 (default: %(default)s)")
    serve.add_argument(
        "--max-inflight",
        type=positive_int,
        default=DEFAULT_MAX_INFLIGHT,
        metavar="N",
        help="speech requests in flight at most, checked when a request's headers arrive: "
        "past it the server answers 429 with Retry-After at once, before reading the body (default: %(default)s)",
    )
    serve.add_argument(
        "--worker-nice",
        type=int,
        choices=range(20),
        default=DEFAULT_WORKER_NICE,
        metavar="0-19",
        help="local backend: worker processes run this much below the server's CPU priority, so accepting, "
        "refusing (429) and routing never wait behind compute on a busy host; 0 for equal priority (default: %(default)s)",
    )
    serve.add_argument(
        "--shutdown-grace",
        type=nonnegative_float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM or Ctrl-C: stop admitting, let in-flight requests finish this long, then fail the rest with 503 (default: %(default)s)",
    )
    from ..serving.flags import add_operator_args, env_defaults

    add_operator_args(serve)
    serve.set_defaults(func=_cmd_serve)
    env_defaults(serve)

    synth = _subparser(sub, "synthesize", "synthesize one utterance to an audio file through the same runtime")
    synth.add_argument("text", help="the text to speak")
    synth.add_argument("-o", "--output", default=None, help="output file ('-' writes to stdout); required unless --print-normalized")
    synth.add_argument(
        "--print-normalized", action="store_true",
        help="print the text as the pipeline will speak it (numbers, dates, phone numbers, URLs spelled out) and exit without synthesizing",
    )
    _runtime_args(synth)
    synth.add_argument("--voice", default=None, help="voice name passed to the pipeline")
    synth.add_argument("--speed", type=float, default=1.0, help="speaking rate, 0.25 to 4.0 (default: %(default)s)")
    from .request_flags import add_request_flags

    add_request_flags(synth)
    synth.add_argument(
        "--format",
        choices=sorted(set(SUFFIX_FORMATS.values())),
        default=None,
        help="audio format (default: what the output suffix names; wav for '-' or no suffix)",
    )
    synth.set_defaults(func=_cmd_synthesize)

    topo = _subparser(sub, "topology", "print the compiled process topology (same as omni-compile show)")
    add_pipeline_arguments(topo, runs=False)
    topo.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: %(default)s)")
    add_backend_args(topo)
    topo.add_argument(
        "--device", default=None, choices=["auto", "cpu", "cuda"],
        help="with --backend ray, as for serve: 'auto' (the default there) places the declared GPUs when torch sees CUDA, "
        "else every process without GPUs; 'cpu' never asks for GPUs",
    )
    topo.add_argument("--startup-timeout", type=float, default=120.0, help="with --backend ray: seconds every process gets to start (default: %(default)s)")
    topo.set_defaults(func=_cmd_topology)

    _bench_parser(sub)
    return parser


def _subparser(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    return sub.add_parser(
        name,
        help=help_text,
        description=help_text[0].upper() + help_text[1:] + ".",
        epilog=_OVERRIDES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _runtime_args(parser: argparse.ArgumentParser) -> None:
    add_pipeline_arguments(parser)
    parser.add_argument("--startup-timeout", type=float, default=120.0, help="seconds every process gets to build its stages (default: %(default)s)")
    parser.add_argument(
        "--request-timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="deadline of each request; past it the request fails and is cancelled in every stage (default: %(default)s)",
    )
    parser.add_argument(
        "--heartbeat-timeout",
        type=nonnegative_float,
        default=30.0,
        metavar="SECONDS",
        help="a ready worker silent this long (frozen, or a stage blocking its event loop) is killed and restarted "
        "under its policy, its requests failed at once; 0 turns it off (default: %(default)s)",
    )
    parser.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], help="log level of the server and every worker (default: %(default)s)")
    parser.add_argument("--log-format", default="text", choices=["text", "json"], help="one line per event as text, or as one JSON object (default: %(default)s)")
    add_backend_args(parser)


def _bench_parser(sub: Any) -> None:
    import importlib

    try:
        bench_module = importlib.import_module("omni_runtime.bench")
    except ModuleNotFoundError as exc:
        if exc.name != "omni_runtime.bench":
            raise
        bench = _subparser(sub, "bench", "workload benchmark (unavailable: omni_runtime.bench is not installed)")
        bench.set_defaults(func=_bench_missing)
        return
    bench = _subparser(sub, "bench", "measure a workload (RTF, TTFA, requests/s, RSS) on the current topology and on alternatives")
    bench_module.add_arguments(bench)
    bench.set_defaults(func=bench_module.run)


def _bench_missing(args: argparse.Namespace) -> int:
    print(
        "error: omni bench is not available: the module omni_runtime.bench is not installed\n"
        "  fix:  install an omni-runtime that ships it (pip install -e packages/omni-runtime)",
        file=sys.stderr,
    )
    return 2


# -- commands ---------------------------------------------------------------


def _cmd_topology(args: argparse.Namespace) -> int:
    kwargs = backend_kwargs(args)
    if kwargs["backend"] == "ray" and args.device is None:
        args.device = "auto"  # the processes really start: the device means what it means for serve and synthesize
    pipeline = load_pipeline(args, _stderr)
    from omni_compiler import render

    if kwargs["backend"] == "ray":  # where the processes really land: start them on the cluster, report, stop
        from ..raycluster.report import placed_topology

        runtime = _runtime(pipeline, args, log=_stderr)
        print(asyncio.run(placed_topology(runtime, args.format)))
        return 0
    print(render.to_json(pipeline.topology) if args.format == "json" else render.text(pipeline.topology))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..serving.flags import check_env

    check_env(args)
    from ..serving.app import ServingSettings
    from ..serving.guard import ConnectionLimits
    from ..serving.request import SpeechLimits
    from ..serving.server import ServeOptions, bind, serve_runtime
    from ..serving.voices import build_info

    pipeline = load_pipeline(args, _stderr)
    models = tuple(dict.fromkeys(args.served_model_name or [pipeline.model_id]))
    settings = ServingSettings(
        models=models,
        limits=SpeechLimits(max_input_chars=args.max_input_chars, max_body_bytes=args.max_body_bytes),
        api_key=args.api_key or None,
        allowed_origins=tuple(args.allowed_origins),
        body_timeout=args.body_timeout,
        build=build_info(pipeline.topology),
        voices_dir=args.voices_dir,
    )
    options = ServeOptions(
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        shutdown_grace=args.shutdown_grace,
        root_path=args.root_path.rstrip("/"),
        keep_alive=args.keep_alive_timeout,
        connections=ConnectionLimits(header_timeout=args.header_timeout, body_timeout=args.body_timeout, max_connections=args.max_connections),
        max_inflight=args.max_inflight,
    )
    sock = bind(options.host, options.port)

    async def run() -> None:
        runtime = _runtime(pipeline, args, log=_stdout, arrays="numpy")
        await serve_runtime(runtime, settings, options, sock, announce=_stdout, start_runtime=True)

    asyncio.run(run())
    return 0


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from ..serving.audio import encode
    from ..serving.request import MAX_SPEED, MIN_SPEED
    from ..serving.synthesis import collect_audio

    if not args.text.strip():
        raise UserError("error: the text is empty\n  fix:  pass the words to speak, e.g. omni synthesize \"Hello.\" -o out.wav")
    if not MIN_SPEED <= args.speed <= MAX_SPEED:
        raise UserError(f"error: --speed = {args.speed}\n  rule: speed must be between {MIN_SPEED} and {MAX_SPEED}\n  fix:  pass --speed 1.0")
    if args.print_normalized:
        print(_normalizer(load_pipeline(args, _stderr))(args.text))
        return 0
    if args.output is None:
        raise UserError("error: -o/--output is missing\n  rule: synthesize writes an audio file\n  fix:  pass -o out.wav (or -o - for stdout)")
    fmt = output_format(args.output, args.format)
    out = None if args.output == "-" else Path(args.output)
    if out is not None and not out.parent.is_dir():
        raise UserError(f"error: -o {args.output}\n  rule: the folder {str(out.parent)!r} does not exist\n  fix:  create it or write somewhere else")
    pipeline = load_pipeline(args, _stderr)
    data = {"text": args.text, "voice": args.voice, "speed": float(args.speed), "response_format": fmt, "stream": False}
    from .request_flags import request_fields

    data.update(request_fields(args))

    async def run() -> Any:
        runtime = _runtime(pipeline, args, log=_stderr)
        try:
            with _sigterm_cancels():
                await runtime.start()
                handle = await runtime.submit(data)
                return await collect_audio(handle)
        finally:
            await _quiet_shutdown(runtime)

    if out is None:
        with stdout_reserved() as audio_out:
            audio = asyncio.run(run())
            audio_out.write(encode(audio, fmt))
        return 0
    audio = asyncio.run(run())
    write_atomic(out, encode(audio, fmt))
    seconds = audio.frames / audio.sample_rate
    print(f"wrote {out} ({fmt}, {seconds:.2f} s, {audio.sample_rate} Hz, {audio.channels} channel{'s' if audio.channels != 1 else ''})")
    return 0


# -- shared -----------------------------------------------------------------


def _normalizer(pipeline: Pipeline) -> Any:
    """``normalize_text(text)`` of the entry stage's factory module: the text as that pipeline speaks it."""
    import importlib

    topology = pipeline.topology
    entry = next(s for s in topology.stages if s.name == topology.entry_stage)
    module_name = entry.factory.partition(":")[0]
    normalize = getattr(importlib.import_module(module_name), "normalize_text", None)
    if not callable(normalize):
        raise UserError(f"error: --print-normalized\n  rule: the entry stage's module {module_name} defines no normalize_text(text), "
                        "so the spoken form cannot be shown without running the pipeline\n"
                        "  fix:  synthesize and listen, or add normalize_text to that module")
    return normalize


def _runtime(pipeline: Pipeline, args: argparse.Namespace, log: Any, arrays: str = "torch") -> Any:
    """The runtime the command drives; ``omni serve`` takes results as numpy arrays, so the server never imports torch."""
    from omni_runtime import Runtime

    return Runtime(
        pipeline.topology,
        device=pipeline.device,
        startup_timeout=args.startup_timeout,
        model_path=pipeline.weights,
        log=log,
        request_timeout=getattr(args, "request_timeout", 300.0),  # omni topology --backend ray starts a runtime without these flags
        max_inflight=getattr(args, "max_inflight", None),
        log_level=getattr(args, "log_level", "warning"),
        log_format=getattr(args, "log_format", "text"),
        heartbeat_timeout=getattr(args, "heartbeat_timeout", 30.0) or None,
        arrays=arrays,
        **backend_kwargs(args),
    )


@contextlib.contextmanager
def _sigterm_cancels() -> Iterator[None]:
    """SIGTERM cancels the current task (like Ctrl-C) so the runtime still shuts down cleanly.

    Without it SIGTERM's default action ends the parent at once, skipping the
    removal of the run's IPC directory and shared memory.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    if task is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


async def _quiet_shutdown(runtime: Any) -> None:
    try:
        await runtime.shutdown()
    except Exception as exc:  # already failing or stopped: the original error matters more
        print(f"omni: runtime shutdown: {exc}", file=sys.stderr)


def _version() -> str:
    from .. import __version__

    return __version__


def _stdout(line: str) -> None:
    print(line, flush=True)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)

