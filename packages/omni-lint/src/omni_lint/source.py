"""Parsed Python files, cached per path for the whole run.

Each file is read and parsed with libcst once, however many model folders and
pipelines reach it (shared ``common/`` helpers are the usual case). Whatever a
file holds, reading it ends in a parsed module or in a reason (reported once
as OL900), never in a crash, a hang or a traceback:

* only regular files are read (a FIFO would block, ``/dev/zero`` never ends),
  and at most :data:`MAX_FILE_BYTES` of them;
* the PEP 263 encoding cookie is honoured (``# -*- coding: latin-1 -*-``);
* :mod:`omni_lint.guard` refuses sources the native parser cannot take safely
  (bracket nesting past CPython's own limit, operator chains whose parse time
  grows with their square) before libcst sees them.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .guard import parse_hazard


def file_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


#: Larger Python files are refused (OL900): real modules are far smaller, and a runaway
#: read (a symlink to a device) must stop.
MAX_FILE_BYTES = 2 * 1024 * 1024


@dataclass
class ParsedFile:
    path: Path
    source: str | None
    module: cst.Module | None
    #: (line, col, message), 1-based, when the file could not be parsed
    error: tuple[int, int, str] | None = None
    #: blake2b of the raw bytes ("" when the file could not be read)
    digest: str = ""
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


class Located:
    """``path``, ``line`` and ``col`` of a value that carries its ``parsed`` file and ``node``
    (positions are resolved only when a message needs them)."""

    parsed: ParsedFile
    node: cst.CSTNode

    @property
    def path(self) -> str:
        return str(self.parsed.path)

    @property
    def line(self) -> int:
        return self.parsed.position(self.node)[0]

    @property
    def col(self) -> int:
        return self.parsed.position(self.node)[1]


def digest_bytes(raw: bytes) -> str:
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def read_regular(path: Path, limit: int = MAX_FILE_BYTES) -> tuple[bytes | None, str]:
    """The bytes of a regular file of at most ``limit`` bytes, or None and the reason.

    The file is opened without following it into a device or a FIFO (``O_NONBLOCK`` and an
    ``fstat`` of the opened descriptor), so neither blocks nor reads without end.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, "symlink loop: the path never reaches a file"
        return None, f"cannot read the file: {exc.strerror}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"not a regular file ({file_kind(info.st_mode)}); only regular files are read"
        if info.st_size > limit:
            return None, f"file is {info.st_size} bytes, over the {limit}-byte limit for a Python module"
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > limit:
                return None, f"file grew past the {limit}-byte limit while being read"
            chunks.append(chunk)
        return b"".join(chunks), ""
    except OSError as exc:
        return None, f"cannot read the file: {exc.strerror}"
    finally:
        os.close(fd)


def decode_source(raw: bytes) -> tuple[str | None, tuple[int, int, str] | None]:
    """Decode with the PEP 263 cookie (or a BOM), UTF-8 by default."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        return None, (exc.lineno or 1, 1, f"bad encoding declaration: {exc.msg}")
    try:
        text = raw.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        start = getattr(exc, "start", 0)
        line = raw[:start].count(b"\n") + 1
        reason = exc.reason if isinstance(exc, UnicodeDecodeError) else str(exc)
        shown = encoding.upper() if encoding.lower().startswith("utf") else encoding
        return None, (line, 1, f"the file is not valid {shown} ({reason} at byte {start}); declare its encoding (PEP 263) or save it as UTF-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, None


def parse_bytes(path: Path, raw: bytes) -> ParsedFile:
    digest = digest_bytes(raw)
    source, problem = decode_source(raw)
    if source is None:
        return ParsedFile(path, None, None, problem, digest)
    hazard = parse_hazard(source)
    if hazard is not None:
        return ParsedFile(path, source, None, hazard, digest)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        return ParsedFile(path, source, None, (exc.raw_line, exc.raw_column + 1, f"syntax error: {exc.message}"), digest)
    except RecursionError:
        return ParsedFile(path, source, None, (1, 1, "nesting too deep to parse"), digest)
    except Exception as exc:  # libcst raises a few other types on exotic input
        return ParsedFile(path, source, None, (1, 1, f"cannot parse: {exc}"), digest)
    return ParsedFile(path, source, module, None, digest)


class SourceCache:
    def __init__(self) -> None:
        self._files: dict[Path, ParsedFile] = {}
        #: per-module scans (``scan.ModuleInfo``) by (import root, module name, content digest)
        self.scans: dict[tuple[Path, str, str], Any] = {}
        #: function facts by (import root, function), with what computing them read and probed
        self.facts: dict[tuple[Path, Any], Any] = {}
        #: where each dotted module name of an import root lives, with the paths probed to find it
        self.module_files: dict[tuple[Path, str], Any] = {}

    def get(self, path: Path) -> ParsedFile:
        parsed = self._files.get(path)
        if parsed is not None:
            return parsed
        try:
            resolved = path.resolve(strict=True)
        except RuntimeError:  # a symlink loop (Python 3.11 raises RuntimeError for it)
            resolved = None
        except OSError as exc:
            resolved = None if exc.errno == errno.ELOOP else path.absolute()
        if resolved is None:
            parsed = ParsedFile(path.absolute(), None, None, (1, 1, "symlink loop: the path never reaches a file"))
            self._files[path] = parsed
            return parsed
        parsed = self._files.get(resolved)
        if parsed is None:
            raw, reason = read_regular(resolved)
            # a refused file is reported where the user sees it (the link, not /dev/zero)
            parsed = ParsedFile(path.absolute(), None, None, (1, 1, reason)) if raw is None else parse_bytes(resolved, raw)
            self._files[resolved] = parsed
        self._files[path] = parsed
        return parsed

    def files(self) -> list[ParsedFile]:
        unique: dict[Path, ParsedFile] = {}
        for parsed in self._files.values():
            unique.setdefault(parsed.path, parsed)
        return list(unique.values())
