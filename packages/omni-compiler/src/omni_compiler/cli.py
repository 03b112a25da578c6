"""``omni-compile``: validate, show and export pipeline configs.

Exit codes: 0 valid, 1 invalid config (every error at once), 2 usage error,
unreadable file, YAML syntax error or an internal failure. Never a traceback
for a user mistake.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from omni_config import ConfigError, ConfigFileError, load_config, resolve_model_source, split_overrides

from . import __version__, render
from .compiler import compile

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

_EPILOG = """\
overrides:
  Deployment-tier fields can be set on the command line after FILE, typed by the schema:
    --stages.NAME.process P            put a stage in OS process P
    --stages.NAME.gpu 0                (or 0,1 for one GPU per TP rank)
    --stages.NAME.tp_size 2
    --stages.NAME.runtime.resources.total_gpu_memory_fraction 0.1
    --stages.NAME.factory_args.ARG VALUE
    --processes.P.num_replicas 2       (creates the processes entry)
    --processes.P.replica_devices 1,2  (or [1,2])
    --placement.max_total_gpu_memory_fraction_per_gpu 0.95
  --a.b=v works too. Wiring, factories and the process-local contract belong to
  the model's pipeline file and cannot be overridden.

errors name the file, line and column of the YAML node they are about (or the
command-line flag); --format github turns them into GitHub Actions annotations.

exit codes: 0 valid, 1 invalid config (every error at once), 2 usage error /
unreadable or unsafe file (not a regular file, too large, YAML syntax, alias
bomb, nesting too deep, Python tags) / internal error
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omni-compile",
        description="Compile an omni pipeline config into its process topology and check every rule of the spec "
        "(process-local contract, TP, replicas, graph, GPU memory fractions) before anything starts.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"omni-compile {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{validate,show,schema}")
    sub.required = True
    for name, formats, help_text in (
        ("validate", ("text", "json", "github"), "check a config; print the process table (exit 0) or every error (exit 1)"),
        ("show", ("text", "json", "mermaid", "dot", "html", "github"), "print the compiled topology: table, replicas, TP ranks, cross-process edges, GPU budget "
         "(--format html -o topology.html: a standalone page drawing it, for code review)"),
    ):
        cmd = sub.add_parser(name, help=help_text, description=help_text, epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.add_argument("config", metavar="FILE", help="a full pipeline file, a deployment file (extends:), or a registered model name")
        cmd.add_argument("--format", choices=formats, default="text",
                         help="output format (default: text); github: errors as GitHub Actions annotations (::error file=...,line=...,col=...::) on stdout, the rest as text")
        cmd.add_argument("--gpus", type=int, metavar="N", help="check GPU ids against a machine with N GPUs")
        if name == "show":
            cmd.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout (the usual way with --format html)")
    schema = sub.add_parser("schema", help="print the JSON Schema of pipeline files", description="print the JSON Schema of pipeline files")
    schema.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    positional, overrides = split_overrides(args_list)
    parser = _parser()
    try:
        args = parser.parse_args(positional)
        if getattr(args, "gpus", None) is not None and args.gpus < 1:
            parser.error(f"argument --gpus: the device count must be at least 1, got {args.gpus}")
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return _run(args, overrides)
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a tool failure, not a user mistake
        if os.environ.get("OMNI_DEBUG"):
            raise
        print(f"omni-compile: internal error: {type(exc).__name__}: {exc} (set OMNI_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace, overrides: list[str]) -> int:
    if args.command == "schema":
        if overrides:
            print(f"omni-compile schema: takes no overrides, got {overrides[0]}", file=sys.stderr)
            return EXIT_USAGE
        from omni_config import json_schema

        text = json.dumps(json_schema(), indent=2)
        if args.output:
            try:
                with open(args.output, "w", encoding="utf-8") as handle:
                    handle.write(text + "\n")
            except OSError as exc:
                print(f"omni-compile: cannot write {args.output}: {exc}", file=sys.stderr)
                return EXIT_USAGE
        else:
            print(text)
        return EXIT_OK
    fmt = args.format
    try:
        source = resolve_model_source(args.config)
        topology = compile(load_config(source, overrides), num_gpus=args.gpus)
    except ConfigFileError as exc:
        _report(exc, fmt)
        return EXIT_USAGE
    except ConfigError as exc:
        _report(exc, fmt)
        return EXIT_INVALID
    if fmt == "html" or getattr(args, "output", None):
        return _write_output(args, topology)
    if fmt == "json":
        print(render.to_json(topology))
    elif args.format == "mermaid":
        print(render.mermaid(topology))
    elif args.format == "dot":
        print(render.dot(topology))
    elif args.command == "validate":
        print(render.table(topology))
        print(f"\nvalid: {args.config} ({len(topology.instances)} OS process(es), {len(topology.cross_process_edges)} cross-process edge(s))")
    else:
        print(render.text(topology))
    return EXIT_OK


def _write_output(args: argparse.Namespace, topology: object) -> int:
    from . import render_html

    formats = {"html": render_html.render, "json": render.to_json, "mermaid": render.mermaid, "dot": render.dot, "text": render.text, "github": render.text}
    text = formats[args.format](topology)
    if not args.output or args.output == "-":
        print(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        print(f"omni-compile: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {args.output} ({args.format}, {len(topology.instances)} OS process(es))", file=sys.stderr)
    return EXIT_OK


def _report(exc: ConfigError | ConfigFileError, fmt: str) -> None:
    if fmt == "json":
        print(json.dumps(exc.to_dict(), indent=2))
        return
    if fmt == "github":
        from .github import annotations

        sys.stdout.write(annotations(exc))
    print(str(exc), file=sys.stderr)


def entry() -> NoReturn:
    """The ``omni-compile`` command: :func:`main`, then an exit that skips interpreter teardown.

    Freeing every pydantic schema object and module one by one at exit costs
    up to a third of a ``validate`` run, and a one-shot command has nothing to
    clean up once its output is flushed (files it writes are closed already);
    mypy ends its runs the same way. Tests and embedders call :func:`main`.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away (| head), or the stream is closed
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
