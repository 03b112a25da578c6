"""Read a YAML document into plain JSON values, refusing what a config must never hold.

PyYAML's loaders accept duplicate keys (keeping the last silently), share one
object between every alias of an anchor (so an override of one stage changes
every stage that aliased the same mapping), expand alias bombs without limit,
recurse on deep nesting, and turn ``2024-01-01`` into a ``date`` that no JSON
writer takes. This reader builds values from the parser's event stream
instead, iteratively, and:

- copies an anchor's value at each alias, so every node is its own object;
- bounds the document: nesting depth (:data:`MAX_DEPTH`) and values after
  alias expansion (:data:`MAX_VALUES`), checked before a copy is made, so an
  alias bomb fails at once (an unsafe file: :class:`ConfigFileError`),
  aliases may copy :data:`MAX_ALIAS_VALUES` values in all, and the text of
  the expanded document is bounded in bytes (:data:`MAX_EXPANDED_BYTES`): one
  64 KiB string aliased 99,000 times is a few values but 6.5 GB once a
  worker receives it;
- refuses duplicate keys (both lines named), non-string keys, tags other than
  the JSON ones, dates, timestamps, binary, NaN and infinities, each an issue
  with its path, line and column (:class:`ConfigError`, all at once);
- records the line and column of every value, for errors CI can annotate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from .errors import ConfigError, ConfigFileError, ConfigIssue

MAX_DEPTH = 64
MAX_VALUES = 500_000
#: Values copied by aliases: anchors share snippets; a bomb copies millions.
MAX_ALIAS_VALUES = 100_000
#: Bytes of scalar text (keys and values, UTF-8) after alias expansion: what a file of the
#: largest readable size can hold without aliases (``loader.MAX_CONFIG_BYTES``).
MAX_EXPANDED_BYTES = 4 * 1024 * 1024

#: 1-based (line, column) of a YAML node.
Mark = tuple[int, int]

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
_SCALARS = {f"{_TAG}{name}": name for name in ("str", "int", "float", "bool", "null")}
_COLLECTIONS = {None, "!", f"{_TAG}map", f"{_TAG}seq"}
_RESOLVER = Resolver()
_CONSTRUCTOR = SafeConstructor()
_NO_KEY, _MERGE, _BAD_KEY = object(), object(), object()


@dataclass(frozen=True)
class Document:
    data: Any
    marks: dict[tuple[Any, ...], Mark]
    """Line and column of each value by its path (keys and list indices)."""
    issues: tuple[ConfigIssue, ...]
    """User mistakes found while reading (the value stands in as text, the first of duplicate keys is kept),
    reported with the schema's errors so a file is fixed in one pass."""


def read_document(text: str, source: str) -> Document:
    """Raises :class:`ConfigFileError` for a syntax error or an unsafe file; mistakes are in ``issues``."""
    builder = _Builder(source)
    parser = _Parser(text)
    try:
        while parser.check_event():
            builder.feed(parser.get_event())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own bound, met while scanning ahead of our events
            raise ConfigFileError(source, f"nesting deeper than {MAX_DEPTH} levels{where}", "flatten the file: a pipeline config needs a handful of levels", *_position(mark)) from None
        raise ConfigFileError(source, f"YAML syntax error{where}: {problem}", "fix the YAML syntax", *_position(mark)) from None
    finally:
        parser.dispose()
    from .validation import dotted_path

    issues = tuple(
        ConfigIssue(dotted_path(path, builder.root), rule, fix, value=value, source=source, line=mark[0], column=mark[1])
        for path, rule, fix, value, mark in builder.issues
    )
    return Document(builder.root, builder.marks, issues)


def read_value(text: str) -> Any:
    """One CLI override value, under the same rules; raises ``ValueError`` with the rule."""
    try:
        document = read_document(text, "the value")
    except ConfigFileError as exc:
        raise ValueError(exc.reason) from None
    if document.issues:
        raise ValueError(document.issues[0].rule)
    return document.data


def _position(mark: Any) -> tuple[int | None, int | None]:
    return (mark.line + 1, mark.column + 1) if mark is not None else (None, None)


@dataclass
class _Anchor:
    value: Any
    size: int
    """Values in the anchored node (itself included), counted again at each alias."""
    nbytes: int
    """Bytes of scalar text in the anchored node, counted again at each alias."""
    height: int
    """Nesting levels of the anchored node (0 for a scalar)."""


class _Frame:
    """A mapping or sequence being built."""

    __slots__ = ("anchor", "height", "key", "key_mark", "keys", "kind", "mark", "merges", "path", "start", "start_bytes", "value")

    def __init__(self, kind: str, path: tuple[Any, ...], mark: Mark, anchor: str | None, start: int, start_bytes: int) -> None:
        self.kind, self.path, self.mark, self.anchor, self.start, self.start_bytes = kind, path, mark, anchor, start, start_bytes
        self.value: Any = {} if kind == "map" else []
        self.height = 1
        self.key: Any = _NO_KEY
        self.key_mark: Mark = mark
        self.keys: dict[str, Mark] = {}
        self.merges: list[tuple[Any, Mark]] = []


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchor] = {}
        self.marks: dict[tuple[Any, ...], Mark] = {}
        self.issues: list[tuple[tuple[Any, ...], str, str, Any, Mark]] = []
        self.root: Any = None
        self.count = 0
        self.nbytes = 0
        self.copied = 0
        self.documents = 0

    def feed(self, event: yaml.Event) -> None:
        mark = (event.start_mark.line + 1, event.start_mark.column + 1)
        if isinstance(event, yaml.ScalarEvent):
            size = len(event.value.encode("utf-8", "surrogatepass"))
            self._grow(1, 0, mark, size)
            value = self._scalar(event, mark)
            if event.anchor is not None:
                self.anchors[event.anchor] = _Anchor(value, 1, size, 0)
            self._add(value, mark, 0)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._grow(1, 1, mark)
            self._refuse_code(event.tag, mark)
            if event.tag not in _COLLECTIONS:
                self._issue(self._path(), f"the YAML tag {event.tag} is not allowed: config values are plain JSON values", "remove the tag", event.tag, mark)
            kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
            self.stack.append(_Frame(kind, self._path(), mark, event.anchor, self.count, self.nbytes))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = self.stack.pop()
            if frame.merges:
                self._merge(frame)
            if frame.anchor is not None:
                self.anchors[frame.anchor] = _Anchor(frame.value, self.count - frame.start + 1, self.nbytes - frame.start_bytes, frame.height)
            self._add(frame.value, frame.mark, frame.height)
        elif isinstance(event, yaml.AliasEvent):
            anchor = self.anchors.get(event.anchor)
            if anchor is None:
                raise ConfigFileError(self.source, f"the alias *{event.anchor} at line {mark[0]} refers to no complete anchor before it (an alias inside its own anchor, or a typo)",
                                      f"define &{event.anchor} before using it, outside the node it names", *mark)
            self.copied += anchor.size
            if self.copied > MAX_ALIAS_VALUES:
                raise ConfigFileError(self.source, f"aliases copy more than {MAX_ALIAS_VALUES} values by line {mark[0]} (an alias bomb, or a file built on aliases)",
                                      "remove aliases that copy large parts of the file", *mark)
            self._grow(anchor.size, anchor.height, mark, anchor.nbytes)
            self._add(_copy(anchor.value), mark, anchor.height)
        elif isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise ConfigFileError(self.source, f"a second YAML document starts at line {mark[0]}", "keep one document (one config) per file", *mark)

    def _grow(self, values: int, height: int, mark: Mark, nbytes: int = 0) -> None:
        """Refuse the node before building it when it would pass a bound."""
        self.count += values
        self.nbytes += nbytes
        if self.nbytes > MAX_EXPANDED_BYTES:
            raise ConfigFileError(self.source, f"the document's text expands to more than {MAX_EXPANDED_BYTES} bytes (aliases counted at each use) by line {mark[0]}: "
                                  "an alias bomb, or values far larger than a config needs",
                                  "remove aliases that repeat large values; pass large data as a file path, not inline", *mark)
        if self.count > MAX_VALUES:
            raise ConfigFileError(self.source, f"the document expands to more than {MAX_VALUES} values (aliases counted at each use) by line {mark[0]}",
                                  "remove aliases that copy large parts of the file, or split the file", *mark)
        if len(self.stack) + height > MAX_DEPTH:
            raise ConfigFileError(self.source, f"nesting deeper than {MAX_DEPTH} levels at line {mark[0]}", "flatten the file: a pipeline config needs a handful of levels", *mark)

    def _path(self) -> tuple[Any, ...]:
        """Where the next value goes (a key's own path is its mapping's)."""
        if not self.stack:
            return ()
        parent = self.stack[-1]
        if parent.kind == "seq":
            return (*parent.path, len(parent.value))
        if parent.key is _NO_KEY or parent.key is _BAD_KEY or parent.key is _MERGE:
            return parent.path
        return (*parent.path, parent.key)

    def _issue(self, path: tuple[Any, ...], rule: str, fix: str, value: Any, mark: Mark) -> None:
        self.issues.append((path, rule, fix, value, mark))

    def _add(self, value: Any, mark: Mark, height: int) -> None:
        if not self.stack:
            self.root = value
            self.marks[()] = mark
            return
        parent = self.stack[-1]
        parent.height = max(parent.height, height + 1)
        if parent.kind == "seq":
            self.marks[(*parent.path, len(parent.value))] = mark
            parent.value.append(value)
        elif parent.key is _NO_KEY:
            self._take_key(parent, value, mark)
        else:
            key, parent.key = parent.key, _NO_KEY
            if key is _MERGE:
                parent.merges.append((value, mark))
            elif key is not _BAD_KEY:
                self.marks[(*parent.path, key)] = mark
                parent.value[key] = value

    def _take_key(self, parent: _Frame, key: Any, mark: Mark) -> None:
        if key is _MERGE:
            parent.key = _MERGE
            return
        if not isinstance(key, str):
            shown = "a mapping or list" if isinstance(key, (dict, list)) else f"{type(key).__name__} {key!r}"
            self._issue(parent.path, f"a mapping key must be a string; YAML reads this key as {shown}", f"quote the key: '{key}':" if not isinstance(key, (dict, list)) else "use a plain text key", key, mark)
            parent.key = _BAD_KEY
            return
        first = parent.keys.get(key)
        if first is not None:
            self._issue((*parent.path, key), f"the key '{key}' appears twice in this mapping (line {first[0]} and line {mark[0]}); YAML would silently keep only the last value",
                        f"remove one of the two '{key}' entries", key, mark)
            parent.key = _BAD_KEY
            return
        parent.keys[key] = mark
        parent.key = key

    def _merge(self, frame: _Frame) -> None:
        """``<<: *base``: keys of the merged mappings that the mapping does not set itself (the first merged wins)."""
        for value, mark in frame.merges:
            sources = value if isinstance(value, list) else [value]
            for source in sources:
                if not isinstance(source, dict):
                    self._issue(frame.path, "'<<' merges a mapping or a list of mappings", "point '<<' at a mapping anchor: <<: *base", source, mark)
                    continue
                for key, item in source.items():
                    if key not in frame.value:
                        frame.value[key] = item
                        self.marks[(*frame.path, key)] = mark

    def _refuse_code(self, tag: str | None, mark: Mark) -> None:
        """A Python object tag is an unsafe file, not a typo: exit 2, like an unreadable file."""
        if tag is not None and tag.startswith(f"{_TAG}python/"):
            raise ConfigFileError(self.source, f"the Python object tag {tag} at line {mark[0]} asks the loader to run code", "remove the tag: config files hold plain values only", *mark)

    def _scalar(self, event: yaml.ScalarEvent, mark: Mark) -> Any:
        tag = event.tag
        if tag is None or tag == "!":
            tag = _RESOLVER.resolve(ScalarNode, event.value, event.implicit)
        in_key = bool(self.stack) and self.stack[-1].kind == "map" and self.stack[-1].key is _NO_KEY
        if tag == f"{_TAG}merge":
            if in_key:
                return _MERGE
            tag = f"{_TAG}str"
        path, text = self._path(), event.value
        self._refuse_code(tag, mark)
        if tag not in _SCALARS:
            kind = tag.removeprefix(_TAG)
            if kind == "timestamp":
                self._issue(path, f"YAML reads {text} as a date, which is not a JSON value (config values are text, numbers, booleans and null)", f"quote it ('{text}') if you mean text", text, mark)
            else:
                self._issue(path, f"the YAML tag {tag} is not allowed: config values are plain JSON values (text, numbers, booleans, null, lists, mappings)", "remove the tag", text, mark)
            return text
        try:
            value = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, text))
        except (ValueError, yaml.YAMLError) as exc:
            self._issue(path, f"not a valid {_SCALARS[tag]}: {str(exc).splitlines()[0]}", f"write a valid {_SCALARS[tag]}, or quote it as text", text, mark)
            return text
        if isinstance(value, float) and not math.isfinite(value):
            self._issue(path, f"{text} is not a JSON number (infinity and NaN have no JSON form)", "use a finite number", text, mark)
            return text
        return value


def _copy(value: Any) -> Any:
    """A fresh copy of an anchored value (its height is at most MAX_DEPTH)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def plain_copy(data: Any) -> Any:
    """Copy in-memory config data (``raw_config``) so no two places share a mapping, as the reader does.

    ``copy.deepcopy`` would keep shared references shared, and an override of
    one stage would change every stage holding the same mapping. Nesting is
    bounded as in files (a reference cycle is refused, not followed forever).
    """
    stack: list[tuple[Any, Any, int]] = []
    root = _shallow(data)
    stack.append((data, root, 1))
    while stack:
        original, copied, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ConfigError([ConfigIssue("(config)", f"the config data nests deeper than {MAX_DEPTH} levels (or refers to itself)", "flatten the data; a pipeline config needs a handful of levels")])
        items = original.items() if isinstance(original, dict) else enumerate(original)
        for key, value in items:
            if isinstance(value, (dict, list)):
                child = _shallow(value)
                copied[key] = child
                stack.append((value, child, depth + 1))
    return root


def _shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return list(value)
    return value
