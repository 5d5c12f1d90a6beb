"""Load multi-document YAML into plain data, keeping the line and column of every node.

Why not `yaml.load`: a linter must map any JSON path back to file:line:column, and must
survive hostile input. So documents are built here from ruamel.yaml's *event* stream
(the parser is an iterative state machine; the composer and constructors recurse), with
limits enforced while building:

- file size (read at most `max_bytes + 1` bytes, pipes as files are, by
  `policyd.model.bounded_read`), binary content (NUL), non-UTF-8 (the data files'
  checks, `policyd.model.datafile.decode_text`), empty files;
- nesting depth (a thousands-deep `[[[[...` stops at `max_depth`, never a RecursionError);
- alias expansion: an alias is shared, not copied, but everything downstream (schema
  validation, walks) sees the expanded tree, so each alias is charged the size of what
  it expands to against `max_nodes`; a "billion laughs" is rejected after a few
  thousand events, in milliseconds;
- duplicate keys, merge keys (`<<`), complex keys and unknown tags are problems;
- tabs in indentation get their own clear message instead of the scanner's.

Every failure is one `Problem` with a location; nothing here raises for bad content.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyd.errors import FileTooLargeError, InputDecodeError, InputFileError
from policyd.model.bounded_read import describe_limit, read_bounded
from policyd.model.datafile import (
    EMPTY_MESSAGE,
    TAB_MESSAGE,
    decode_text,
    has_content,
    tab_in_indentation,
)
from policyd.model.spelling import show_value
from policyd.model.yaml_keys import MERGE_KEY_MESSAGE, duplicate_key_message
from policyd.problems import ERROR, WARNING, Problem

Key = str | int
JsonPath = tuple[Key, ...]

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds that keep loading hostile files cheap. Policies are small: the defaults
    are far above any real policy and far below anything that hurts."""

    max_bytes: int = 128 * 1024
    max_depth: int = 64
    # Nodes (scalars + collections) per file after alias expansion.
    max_nodes: int = 20_000
    max_documents: int = 1000


DEFAULT_LIMITS = Limits()


@dataclass(slots=True)
class SourceDocument:
    """One YAML document: its plain data and where each node came from."""

    file: str
    index: int
    data: Any
    line: int  # where the document starts (1-based)
    values: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[JsonPath, tuple[int, int]] = field(default_factory=dict)
    # Scalar style per path (None plain, '"' or "'" quoted, '|' or '>' block), so a
    # position inside a scalar (a JMESPath caret) can be mapped to a column.
    styles: dict[JsonPath, str | None] = field(default_factory=dict)

    def position(self, path: JsonPath, *, key: bool = False) -> tuple[int, int]:
        """(line, column), 1-based, of the node at `path` (of its key with `key=True`);
        falls back to the closest ancestor that has one (paths through an alias, or a
        missing field whose parent exists)."""
        p = tuple(path)
        if key and p in self.keys:
            return self.keys[p]
        while p:
            if p in self.values:
                return self.values[p]
            p = p[:-1]
        return self.values.get((), (self.line, 1))

    def column_in_scalar(self, path: JsonPath, offset: int) -> tuple[int, int] | None:
        """Where character `offset` of a single-line scalar lies in the file, or None
        when the scalar is a block scalar (its text does not sit on the key's line)."""
        p = tuple(path)
        if p not in self.values or p not in self.styles:
            return None
        style = self.styles[p]
        if style in ("|", ">"):
            return None
        line, col = self.values[p]
        return line, col + offset + (1 if style in ('"', "'") else 0)

    def problem(self, path: JsonPath, rule: str, message: str, *, level: str = ERROR,
                key: bool = False, detail: tuple[str, ...] = (),
                at: tuple[int, int] | None = None) -> Problem:
        line, col = at if at is not None else self.position(path, key=key)
        return Problem(self.file, line, col, rule, level,  # type: ignore[arg-type]
                       message, format_path(path), detail, self.index)


    def owns(self, problem: Problem) -> bool:
        """Whether `problem` was found in this document."""
        return problem.file == self.file and problem.document == self.index


class SubDocument(SourceDocument):
    """A document nested inside another (an item of a `kind: List`): its data is the
    node at `base` in the parent, positions are the parent's (problems point at the
    item's own lines) and problem paths are full paths in the parent
    (`items[1].spec.weight`), so a reader finds the field in the file."""

    def __init__(self, parent: SourceDocument, base: JsonPath, data: Any) -> None:
        super().__init__(parent.file, parent.index, data, parent.position(base)[0],
                         parent.values, parent.keys, parent.styles)
        self.base = tuple(base)

    def position(self, path: JsonPath, *, key: bool = False) -> tuple[int, int]:
        return SourceDocument.position(self, (*self.base, *path), key=key)

    def column_in_scalar(self, path: JsonPath, offset: int) -> tuple[int, int] | None:
        return SourceDocument.column_in_scalar(self, (*self.base, *path), offset)

    def problem(self, path: JsonPath, rule: str, message: str, *, level: str = ERROR,
                key: bool = False, detail: tuple[str, ...] = (),
                at: tuple[int, int] | None = None) -> Problem:
        # Placed here (relative path), named in full: the base class would place the
        # full path through this class's position() and add the base twice.
        where = at if at is not None else self.position(path, key=key)
        return SourceDocument.problem(self, (*self.base, *path), rule, message,
                                      level=level, detail=detail, at=where)

    def owns(self, problem: Problem) -> bool:
        # The items of one list share the file and the YAML document: the path tells
        # them apart (`items[1]` must not claim `items[10]`'s problems).
        if not SourceDocument.owns(self, problem):
            return False
        prefix = format_path(self.base)
        return problem.path == prefix or (problem.path.startswith(prefix)
                                          and problem.path[len(prefix)] in ".[")


@dataclass(slots=True)
class SourceFile:
    path: str
    documents: list[SourceDocument]
    problems: list[Problem]
    unreadable: bool = False  # the file could not be read at all (exit code 2)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(path: JsonPath) -> str:
    """`("spec", "filters", 0, "id")` -> `spec.filters[0].id`; keys that are not
    identifiers are quoted: `metadata.labels["a.b/c"]`."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append(f".{part}" if out else part)
        else:
            out.append('["' + part.replace("\\", "\\\\").replace('"', '\\"') + '"]')
    return "".join(out)


# Plain scalars that YAML 1.1 (kubectl, sigs.k8s.io/yaml) reads as booleans while YAML
# 1.2 reads them as strings: the same file would mean two things.
_YAML11_BOOLS = frozenset((
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
    "on", "On", "ON", "off", "Off", "OFF"))


class _Abort(Exception):
    """Stops building a file after a problem that leaves nothing sensible to check."""


@dataclass(slots=True)
class _Frame:
    container: dict[str, Any] | list[Any]
    path: JsonPath
    start_nodes: int
    anchor: str | None
    height: int = 1
    key: str | None = None  # mapping frame: the key waiting for its value
    key_pos: tuple[int, int] = (0, 0)
    skip_next_value: bool = False


def load_file(path: Path, display: str | None = None,
              limits: Limits = DEFAULT_LIMITS) -> SourceFile:
    """Read and load `path`. An unreadable file is one problem with `unreadable` set."""
    name = display if display is not None else str(path)
    try:
        data = read_bounded(path, limits.max_bytes)
    except FileTooLargeError as exc:
        return SourceFile(name, [], [Problem(name, 1, 1, "file-too-large", ERROR,
                                             exc.message)])
    except InputFileError as exc:
        return SourceFile(name, [], [Problem(name, 0, 0, "file-unreadable", ERROR,
                                             exc.message)], True)
    return load_bytes(data, name, limits)


def load_bytes(data: bytes, name: str, limits: Limits = DEFAULT_LIMITS) -> SourceFile:
    """Load YAML bytes; every problem found is returned, nothing is raised."""

    def one(line: int, col: int, rule: str, message: str) -> SourceFile:
        return SourceFile(name, [], [Problem(name, line, col, rule, ERROR, message)])

    if len(data) > limits.max_bytes:
        return one(1, 1, "file-too-large",
                   f"file is larger than the limit of {describe_limit(limits.max_bytes)}")
    try:
        text = decode_text(data, name)  # the same checks and messages as data files
    except InputDecodeError as exc:
        return one(exc.line, exc.column, exc.rule, exc.message)
    if not has_content(text):
        return one(1, 1, "file-empty", EMPTY_MESSAGE)
    deep = _flow_too_deep(text, limits.max_depth)
    if deep is not None:
        return one(deep[0], deep[1], "yaml-depth",
                   f"nesting deeper than {limits.max_depth} levels")
    return _Builder(name, text, limits).run()


def _flow_too_deep(text: str, max_depth: int) -> tuple[int, int] | None:
    """Where flow brackets (`[[[[`, `{{{{`) first nest deeper than `max_depth`.

    Checked before parsing because ruamel's scanner looks ahead over every open flow
    level before emitting a token, which is quadratic: 5000 `[` take a second. Only a
    bracket that can start a flow collection (after a space, an indicator or at the
    start of a line) counts, so `foo[0]` inside a plain scalar does not.
    """
    depth = 0
    line = 1
    line_start = 0
    prev = "\n"
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
            line_start = i + 1
        elif ch in "[{" and prev in " \t\n[{,:-?":
            depth += 1
            if depth > max_depth:
                return line, i - line_start + 1
        elif ch in "]}" and depth:
            depth -= 1
        prev = ch
    return None


class _Builder:
    """Turns the event stream into documents while enforcing the limits."""

    def __init__(self, name: str, text: str, limits: Limits) -> None:
        # ruamel.yaml (~60 ms) only when a file is read: path formatting needs none of it.
        from ruamel.yaml import YAML

        self.name = name
        self.text = text
        self.limits = limits
        self.yaml = YAML(typ="safe", pure=True)
        self.problems: list[Problem] = []
        self.documents: list[SourceDocument] = []
        self.nodes = 0

    def run(self) -> SourceFile:
        # ruamel.yaml (~60 ms) only when a file is read: path formatting needs none of it.
        from ruamel.yaml.error import MarkedYAMLError, YAMLError

        try:
            self._build(self.yaml.parse(self.text))
        except _Abort:
            pass
        except MarkedYAMLError as exc:
            self.problems.append(self._syntax_problem(exc))
        except YAMLError as exc:
            self.problems.append(self._reader_problem(exc))
        except RecursionError:  # defensive: the event parser does not recurse
            self.problems.append(Problem(self.name, 1, 1, "yaml-depth", ERROR,
                                         "nesting too deep"))
        if not self.documents and not self.problems:
            self.problems.append(Problem(self.name, 1, 1, "file-empty", ERROR,
                                         EMPTY_MESSAGE))
        return SourceFile(self.name, self.documents, self.problems)

    # problems ---------------------------------------------------------------------
    def _fail(self, line: int, col: int, rule: str, message: str, doc: int = 0) -> _Abort:
        self.problems.append(Problem(self.name, line, col, rule, ERROR, message,
                                     document=doc))
        return _Abort()

    def _syntax_problem(self, exc: Any) -> Problem:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        tab = tab_in_indentation(self.text, line)
        if tab is not None:
            return Problem(self.name, tab[0], tab[1], "yaml-tab", ERROR, TAB_MESSAGE)
        what = " ".join(str(s) for s in (exc.context, exc.problem) if s)
        return Problem(self.name, line, col, "yaml-syntax", ERROR,
                       f"YAML syntax error: {what or exc}")

    def _reader_problem(self, exc: Any) -> Problem:
        pos = getattr(exc, "position", None)
        if isinstance(pos, int):
            line = self.text.count("\n", 0, pos) + 1
            col = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
            char = getattr(exc, "character", None)
            what = f"character {char!r}" if isinstance(char, str) else (
                f"character U+{char:04X}" if isinstance(char, int) else "character")
            return Problem(self.name, line, col, "yaml-syntax", ERROR,
                           f"{what} is not allowed in YAML")
        return Problem(self.name, 1, 1, "yaml-syntax", ERROR, f"unreadable YAML: {exc}")

    # building ---------------------------------------------------------------------
    def _count(self, n: int, mark: Any, doc: int) -> None:
        self.nodes += n
        if self.nodes > self.limits.max_nodes:
            raise self._fail(mark.line + 1, mark.column + 1, "yaml-too-big",
                             f"document expands to more than {self.limits.max_nodes} "
                             "nodes (an alias bomb?); policies are small, aliases should "
                             "be too", doc)

    def _build(self, events: Iterator[Any]) -> None:
        # ruamel.yaml (~60 ms) only when a file is read: path formatting needs none of it.
        from ruamel.yaml import events as ev
        from ruamel.yaml.nodes import ScalarNode

        resolver = self.yaml.resolver
        constructor = self.yaml.constructor
        doc: SourceDocument | None = None
        stack: list[_Frame] = []
        anchors: dict[str, tuple[Any, int, int]] = {}  # name -> (value, nodes, height)
        skip = 0  # >0 while skipping the value of a rejected key (depth inside it)
        skip_value = False

        def place(value: Any, height: int) -> None:
            """Attach a finished node to its parent (or make it the document root)."""
            nonlocal doc
            assert doc is not None
            if not stack:
                doc.data = value
                return
            top = stack[-1]
            top.height = max(top.height, height + 1)
            if isinstance(top.container, list):
                top.container.append(value)
            else:
                assert top.key is not None
                top.container[top.key] = value
                top.key = None

        def child_path() -> JsonPath:
            top = stack[-1]
            if isinstance(top.container, list):
                return (*top.path, len(top.container))
            assert top.key is not None
            return (*top.path, top.key)

        def expecting_key() -> bool:
            return bool(stack) and isinstance(stack[-1].container, dict) \
                and stack[-1].key is None

        for event in events:
            if skip_value or skip:
                # Skip a whole value subtree (the value of a merge key).
                if isinstance(event, ev.MappingStartEvent | ev.SequenceStartEvent):
                    skip += 1
                elif isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
                    skip -= 1
                skip_value = False
                if skip == 0:
                    stack[-1].key = None
                continue
            if isinstance(event, ev.DocumentStartEvent):
                index = len(self.documents)
                if index >= self.limits.max_documents:
                    raise self._fail(event.start_mark.line + 1, 1, "yaml-too-big",
                                     f"more than {self.limits.max_documents} documents")
                doc = SourceDocument(self.name, index, None, event.start_mark.line + 1)
                anchors = {}
                continue
            if isinstance(event, ev.DocumentEndEvent):
                assert doc is not None
                if doc.data is not None:
                    doc.index = len(self.documents)
                    self.documents.append(doc)
                doc = None
                continue
            if isinstance(event, ev.StreamStartEvent | ev.StreamEndEvent):
                continue
            assert doc is not None
            mark = event.start_mark
            pos = (mark.line + 1, mark.column + 1)
            di = doc.index

            if expecting_key():
                top = stack[-1]
                if isinstance(event, ev.MappingEndEvent):
                    pass  # handled below
                elif isinstance(event, ev.ScalarEvent):
                    self._count(1, mark, di)
                    tag = event.tag
                    if tag is None:
                        tag = resolver.resolve(ScalarNode, event.value, event.implicit)
                    if tag == _MERGE:
                        self.problems.append(Problem(
                            self.name, *pos, "yaml-merge-key", ERROR,
                            MERGE_KEY_MESSAGE,
                            format_path(top.path), document=di))
                        top.key = "<<"
                        skip_value = True
                        continue
                    key = event.value
                    if key in top.container:
                        first = doc.keys.get((*top.path, key), (0, 0))
                        self.problems.append(Problem(
                            self.name, *pos, "yaml-duplicate-key", ERROR,
                            duplicate_key_message(key, first[0]),
                            format_path((*top.path, key)), document=di))
                    else:
                        doc.keys[(*top.path, key)] = pos
                    top.key = key
                    top.key_pos = pos
                    continue
                else:
                    raise self._fail(*pos, "yaml-complex-key",
                                     "only plain scalar keys are supported", di)

            if isinstance(event, ev.AliasEvent):
                target = anchors.get(event.anchor)
                if target is None:  # the parser reports this itself; be safe anyway
                    raise self._fail(*pos, "yaml-syntax",
                                     f"unknown alias {event.anchor!r}", di)
                value, size, height = target
                self._count(size, mark, di)
                if len(stack) + height > self.limits.max_depth:
                    raise self._fail(*pos, "yaml-depth",
                                     f"nesting deeper than {self.limits.max_depth} levels",
                                     di)
                path = child_path() if stack else ()
                doc.values[path] = pos
                place(value, height)
                continue

            if isinstance(event, ev.ScalarEvent):
                self._count(1, mark, di)
                path = child_path() if stack else ()
                value = self._scalar(event, resolver, constructor, ScalarNode, pos, path, di)
                doc.values[path] = pos
                doc.styles[path] = event.style
                if event.anchor:
                    anchors[event.anchor] = (value, 1, 1)
                place(value, 1)
                continue

            if isinstance(event, ev.MappingStartEvent | ev.SequenceStartEvent):
                if len(stack) >= self.limits.max_depth:
                    raise self._fail(*pos, "yaml-depth",
                                     f"nesting deeper than {self.limits.max_depth} levels",
                                     di)
                self._count(1, mark, di)
                tag = event.tag
                if tag not in (None, "!", _MAP, _SEQ):
                    raise self._fail(*pos, "yaml-tag", f"unsupported tag {tag!r}", di)
                path = child_path() if stack else ()
                doc.values[path] = pos
                container: dict[str, Any] | list[Any] = (
                    {} if isinstance(event, ev.MappingStartEvent) else [])
                stack.append(_Frame(container, path, self.nodes, event.anchor))
                continue

            if isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
                frame = stack.pop()
                if frame.anchor:
                    anchors[frame.anchor] = (frame.container,
                                             self.nodes - frame.start_nodes + 1, frame.height)
                place(frame.container, frame.height)
                continue

    def _scalar(self, event: Any, resolver: Any, constructor: Any, node_cls: Any,
                pos: tuple[int, int], path: JsonPath, doc: int) -> Any:
        tag = event.tag
        value: str = event.value
        if tag in (None, "!"):
            if tag == "!" or not event.implicit[0]:
                return value
            tag = resolver.resolve(node_cls, value, event.implicit)
            if tag == _STR and value in _YAML11_BOOLS:
                self.problems.append(Problem(
                    self.name, *pos, "yaml-ambiguous", WARNING,
                    f"{value!r} is a string here (YAML 1.2) but a boolean for YAML 1.1 "
                    "parsers such as kubectl's; quote it", format_path(path), document=doc))
        if tag == _STR:
            return value
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return value.lower() == "true"
        if tag in (_INT, _FLOAT):
            try:
                node = node_cls(tag, value)
                if tag == _INT:
                    return constructor.construct_yaml_int(node)
                return constructor.construct_yaml_float(node)
            except Exception:  # e.g. an integer of more digits than Python converts
                what = "integer" if tag == _INT else "number"
                why = " (too many digits)" if len(value) > 1000 else ""
                self.problems.append(Problem(self.name, *pos, "yaml-tag", ERROR,
                                             f"{show_value(value)} is not a valid {what}{why}",
                                             format_path(path), document=doc))
                return value
        if tag == _TIMESTAMP:
            return value  # JSON has no dates: keep the text, as Kubernetes would
        self.problems.append(Problem(self.name, *pos, "yaml-tag", ERROR,
                                     f"unsupported tag {tag!r}", format_path(path),
                                     document=doc))
        return value
