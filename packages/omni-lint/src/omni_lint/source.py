"""Parsed Python files, cached per path for the whole run.

Each file is read and parsed with libcst once, however many model folders and
pipelines reach it (shared ``common/`` helpers are the usual case). A file that
does not parse is remembered as such and reported once (OL900) instead of
crashing the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider


@dataclass
class ParsedFile:
    path: Path
    source: str | None
    module: cst.Module | None
    #: (line, col, message), 1-based, when the file could not be parsed
    error: tuple[int, int, str] | None = None
    _positions: Any = field(default=None, repr=False)

    def position(self, node: cst.CSTNode) -> tuple[int, int]:
        """1-based line and column of ``node``'s start."""
        if self._positions is None:
            assert self.module is not None
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = wrapper.resolve(PositionProvider)
        code_range = self._positions.get(node)
        if code_range is None:
            return 1, 1
        return code_range.start.line, code_range.start.column + 1


class SourceCache:
    def __init__(self) -> None:
        self._files: dict[Path, ParsedFile] = {}

    def get(self, path: Path) -> ParsedFile:
        path = path.resolve()
        parsed = self._files.get(path)
        if parsed is None:
            parsed = self._parse(path)
            self._files[path] = parsed
        return parsed

    def files(self) -> list[ParsedFile]:
        return list(self._files.values())

    @staticmethod
    def _parse(path: Path) -> ParsedFile:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            return ParsedFile(path, None, None, (1, 1, f"cannot read the file: {exc.strerror}"))
        try:
            source = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw[: exc.start].count(b"\n") + 1
            return ParsedFile(path, None, None, (line, 1, f"the file is not UTF-8 ({exc.reason} at byte {exc.start})"))
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            return ParsedFile(path, source, None, (exc.raw_line, exc.raw_column + 1, f"syntax error: {exc.message}"))
        except Exception as exc:  # libcst raises a few other types on exotic input
            return ParsedFile(path, source, None, (1, 1, f"cannot parse: {exc}"))
        return ParsedFile(path, source, module)
