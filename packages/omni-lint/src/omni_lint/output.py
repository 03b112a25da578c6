"""Render findings for people (text), tools (json), code scanning (SARIF 2.1.0)
and GitHub Actions annotations.

Every format carries the same sorted findings; only the envelope differs.
"""

from __future__ import annotations

import json

from . import __version__
from .engine import LintReport
from .findings import Finding, Severity
from .rules import RULES

FORMATS = ("text", "json", "sarif", "github")


def render(report: LintReport, fmt: str) -> str:
    if fmt == "text":
        return "".join(f.render() + "\n" for f in report.findings)
    if fmt == "json":
        return json.dumps(_json(report), indent=2) + "\n"
    if fmt == "sarif":
        return json.dumps(_sarif(report), indent=2) + "\n"
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in report.findings)
    raise ValueError(f"unknown format {fmt!r}")


def summary(report: LintReport) -> str:
    return (
        f"omni-lint: {report.errors} error{'s' if report.errors != 1 else ''}, "
        + (f"{report.warnings} warning{'s' if report.warnings != 1 else ''}, " if report.warnings else "")
        + f"{report.infos} info "
        f"in {report.models} model folder{'s' if report.models != 1 else ''} "
        f"({report.pipelines} pipeline file{'s' if report.pipelines != 1 else ''}, {report.files} Python files)"
        + (f"; {report.suppressed} suppressed" if report.suppressed else "")
        + (f"; {report.cached} from the cache" if report.cached else "")
    )


def _json(report: LintReport) -> dict[str, object]:
    return {
        "tool": "omni-lint",
        "version": __version__,
        "findings": [f.to_dict() for f in report.findings],
        "summary": {
            "errors": report.errors,
            "warnings": report.warnings,
            "info": report.infos,
            "suppressed": report.suppressed,
            "models": report.models,
            "pipelines": report.pipelines,
            "files": report.files,
            "exit_code": report.exit_code,
        },
    }


def _sarif(report: LintReport) -> dict[str, object]:
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "fullDescription": {"text": " ".join(rule.explanation.split())},
            "defaultConfiguration": {"level": _level(rule.severity)},
            "help": {"text": rule.explain()},
        }
        for rule in RULES.values()
    ]
    index = {code: i for i, code in enumerate(RULES)}
    results = [
        {
            "ruleId": f.code,
            "ruleIndex": index[f.code],
            "level": _level(f.severity),
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": f.path},
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ],
        }
        for f in report.findings
    ]
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "omni-lint", "version": __version__, "rules": rules}}, "results": results}],
    }


def _level(severity: Severity) -> str:
    return {Severity.ERROR: "error", Severity.WARNING: "warning"}.get(severity, "note")


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _github(f: Finding) -> str:
    command = {Severity.ERROR: "error", Severity.WARNING: "warning"}.get(f.severity, "notice")
    props = f"file={_escape_property(f.path)},line={f.line},col={f.col},title={_escape_property(f.code + ' ' + RULES[f.code].name)}"
    return f"::{command} {props}::{_escape_data(f.code + ' ' + f.message)}"
