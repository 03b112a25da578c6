"""``omni-lint [PATH...]``: exit 0 clean (info never fails), 1 findings, 2 tool failure."""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .discovery import DiscoveryError
from .rules import RULES
from .settings import SettingsError, find_pyproject, load_settings


def _codes(text: str) -> tuple[str, ...]:
    return tuple(code.strip() for code in text.split(",") if code.strip())


def _jobs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of worker processes")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omni-lint",
        description="Check that model code agrees with its process-local contract (process_local_edges). "
        "Never imports the code it reads.",
        epilog="Exit status: 0 clean (info findings never fail), 1 errors found, 2 tool failure. "
        "Suppress a reviewed finding with '# omni-lint: ignore[CODE] reason'.",
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="folders holding model folders (default: [tool.omni-lint] paths, else .)")
    parser.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text", help="output format (default: text)")
    parser.add_argument("--explain", metavar="CODE", help="explain a rule code with examples and exit")
    parser.add_argument("--list-rules", action="store_true", help="list every rule code and exit")
    parser.add_argument("--config", metavar="PYPROJECT", help="pyproject.toml to read [tool.omni-lint] from (default: the closest one with that table)")
    parser.add_argument("--select", metavar="CODES", type=_codes, help="only report these codes or prefixes (comma-separated)")
    parser.add_argument("--ignore", metavar="CODES", type=_codes, help="never report these codes or prefixes (comma-separated)")
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="reuse per-folder results stored here while every file they read is unchanged "
        "(default: .omni_lint_cache next to the pyproject.toml with [tool.omni-lint], else in the current directory)",
    )
    parser.add_argument("--no-cache", action="store_true", help="analyse everything again and store nothing")
    parser.add_argument("--jobs", "-j", metavar="N", type=_jobs, help="worker processes (default: every core this process may use; 1: no workers)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="warnings fail the run (exit 1): a call the analysis cannot follow (OL102) or any other incomplete "
        "reach is an error, so a pre-commit hook never passes code omni-lint could not read in full "
        "(also: strict = true in [tool.omni-lint])",
    )
    parser.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    parser.add_argument("--version", action="version", version=f"omni-lint {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.explain:
        code = args.explain.strip().upper()
        rule = RULES.get(code)
        if rule is None:
            import difflib

            match = difflib.get_close_matches(code, list(RULES), n=1)
            hint = f"did you mean {match[0]}?" if match else f"known codes: {', '.join(RULES)}"
            print(f"omni-lint: unknown rule code {args.explain!r}\n  fix:  {hint}", file=sys.stderr)
            return 2
        sys.stdout.write(rule.explain())
        return 0
    if args.list_rules:
        for rule in RULES.values():
            print(f"{rule.code}  {rule.severity.value:<5}  {rule.name}: {rule.summary}")
        return 0
    try:
        if args.config:
            config = Path(args.config)
            if not config.is_file():
                raise SettingsError(f"{config}: no such file\n  fix:  pass the path of a pyproject.toml")
            settings = load_settings(config)
        else:
            settings = load_settings(find_pyproject(Path.cwd()))
        settings = settings.with_codes(args.select, args.ignore, strict=args.strict)
        paths = args.paths or [str(settings.base / p) for p in settings.paths] or ["."]
        from .cache import DEFAULT_DIR
        from .engine import lint
        from .output import render, summary

        cache_dir = None if args.no_cache else Path(args.cache_dir) if args.cache_dir else settings.base / DEFAULT_DIR
        report = lint(paths, settings, cache_dir=cache_dir, jobs=args.jobs)
    except (SettingsError, DiscoveryError) as exc:
        print(f"omni-lint: error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"omni-lint: error: a dependency is missing: {exc}\n  fix:  pip install omni-lint (it needs libcst and omni-config)", file=sys.stderr)
        return 2
    except Exception:  # a bug in the tool, never a user mistake: exit 2, keep the traceback for the report
        print("omni-lint: internal error (please report it with this traceback):", file=sys.stderr)
        traceback.print_exc()
        return 2
    try:
        sys.stdout.write(render(report, args.format))
        sys.stdout.flush()
    except BrokenPipeError:  # ``omni-lint ... | head``: the reader left; the exit status still counts
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return report.exit_code
    if not args.quiet and args.format in ("text", "github"):
        print(summary(report), file=sys.stderr)
    return report.exit_code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
