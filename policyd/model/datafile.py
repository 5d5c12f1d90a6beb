"""Read Kubernetes data files (snapshots, pod files) as big as real clusters produce them.

`kubectl get nodes,pods -A -o yaml` of a 500-node cluster is tens of megabytes, of a
5,000-node one hundreds. Policies and profiles need every node's line and column
(`policyd.sourcefile`), data files only need the values, fast and within bounded memory:

- JSON: the text is decoded one object at a time (`raw_decode`), so a List's items are
  decoded, handed on and dropped one by one instead of building the whole tree first.
- YAML: parsed by yaml-rs (a Rust YAML 1.2 parser; pure-Python YAML is 30 to 100 times
  slower than `json`, PyYAML's libyaml loader still builds every node in Python). A List
  in the layout kubectl prints (`items:` then one `- ` line per item at column 0) is cut
  into its items, which are parsed in a small thread pool (the parser releases the GIL
  while it parses) and handed on in file order. Any other YAML is parsed as a whole.
- The same limits as for every YAML the tool reads: nesting depth, alias expansion
  (a "billion laughs" is rejected, not expanded), duplicate keys, file size; every
  failure is an `InputFileError` naming the file, the line and the column.
"""

from __future__ import annotations

import gc
import json
import json.scanner
import os
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from policyd.errors import InputDecodeError, InputFileError
from policyd.model.bounded_read import read_bounded
from policyd.model.yaml_keys import (
    KeyProblem,
    duplicate_key_message,
    find_key_problem,
    has_merge_key,
)

# Kubernetes objects nest about 20 levels deep. The YAML parser stops flow collections
# (`[[[[`) at this depth itself and block nesting is measured here; JSON's decoder stops
# at the interpreter's recursion limit, which is reported the same way.
MAX_DEPTH = 256
# A file is held in memory as text while its objects are decoded one by one.
MAX_FILE_BYTES = 4 * 1024**3
# A pipe has no size to check first and may never end (`yes |`): it is read up to this,
# which is more than any cluster's `kubectl get -o yaml` (5,000 nodes: a few hundred MB).
MAX_PIPE_BYTES = 1024**3
# Nodes an alias may replay in one document: aliases are for sharing, not multiplying.
MAX_ALIAS_EVENTS = 100_000
# The messages of problems that both YAML loaders find, worded once.
TAB_MESSAGE = "tab character in indentation: YAML indents with spaces only"
EMPTY_MESSAGE = "empty file: no YAML or JSON document"
LIST_KINDS = ("List", "NodeList", "PodList", "NamespaceList", "ServiceList", "ReplicaSetList",
              "StatefulSetList", "ReplicationControllerList")

# YAML items parsed per task, and tasks in flight: enough to keep two cores busy, few
# enough that only a few megabytes of parsed-but-not-yet-decoded objects exist at once.
_BATCH_ITEMS = 64
_IN_FLIGHT = 8
_PARALLEL_FROM_BYTES = 4 * 1024**2


def read_text(path: Path) -> str:
    """The file as UTF-8 text (a BOM dropped); NUL bytes and other encodings rejected.
    Pipes are read too, within `MAX_PIPE_BYTES` and `bounded_read`'s time limit."""
    return decode_text(read_bounded(path, MAX_FILE_BYTES, pipe_max_bytes=MAX_PIPE_BYTES),
                       str(path))


def decode_text(data: bytes, name: str) -> str:
    """UTF-8 text without its BOM, for every file kind alike: a NUL byte (binary, or
    UTF-16) or bytes that are not UTF-8 are an `InputDecodeError` at line:column."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise _decode_error("binary file (NUL byte), expected YAML or JSON", name, data, nul,
                            "file-binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _decode_error(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", name, data,
                            exc.start, "file-encoding") from None
    return text[1:] if text.startswith("\ufeff") else text


def _decode_error(message: str, name: str, data: bytes, offset: int,
                  rule: str) -> InputDecodeError:
    line, col = line_col_bytes(data, offset)
    return InputDecodeError(message, file=name, line=line, column=col, rule=rule)


def iter_objects(path: Path) -> Iterator[tuple[str, Any]]:
    """Each Kubernetes object of the file with where it is (`FILE (document 2)`,
    `FILE (document 1) items[7]`): a single object, a List's items, or the documents of
    a multi-document YAML file, in file order."""
    text = read_text(path)
    if not has_content(text):
        raise InputDecodeError(EMPTY_MESSAGE, file=str(path), line=1, column=1,
                               rule="file-empty")
    with _gc_paused():
        if _is_json(text):
            yield from _JsonReader(text, str(path)).objects()
        elif _KUBECTL_LIST.match(text):
            yield from _YamlListReader(text, str(path)).objects()
        else:
            for d, doc in enumerate(_yaml_documents(text, str(path))):
                yield from list_items(doc, f"{path} (document {d + 1})")


def read_documents(path: Path) -> list[Any]:
    """The documents of a JSON or (multi-document) YAML file, whole (profiles, small
    files); empty documents are dropped."""
    text = read_text(path)
    if _is_json(text):
        return [_JsonReader(text, str(path)).whole()]
    return _yaml_documents(text, str(path))


def list_items(doc: Any, where: str) -> Iterator[tuple[str, Any]]:
    """A document's objects: the items of a List, or the document itself."""
    if not isinstance(doc, dict):
        raise InputFileError("expected a Kubernetes object or List", where=where)
    kind = doc.get("kind")
    if kind in LIST_KINDS or (kind is None and "items" in doc):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputFileError("items must be a list", where=where)
        for i, item in enumerate(items):
            yield f"{where} items[{i}]", item
    else:
        yield where, doc


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Loading allocates millions of objects that all live on; the cyclic collector
    would rescan them again and again (it doubles the time of a large load)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_LINE = re.compile(r"[^\r\n]*")


def has_content(text: str) -> bool:
    """Something other than blank lines, comments and document markers. Lines are read
    one at a time and the first content line ends it: a big file is never split."""
    for m in _LINE.finditer(text):
        s = m.group().strip()
        if s and not s.startswith("#") and s not in ("---", "..."):
            return True
    return False


def _is_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def line_col_bytes(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    return line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# JSON -----------------------------------------------------------------------------------

_JSON_WS = re.compile(r"[ \t\n\r]*")


class _NotJson(ValueError):
    """Python's decoder accepts more than JSON; Kubernetes does not."""


def _not_json(word: str) -> Any:
    raise _NotJson(f"{word} is not a JSON value")


class _DuplicateKey(ValueError):
    """Kubernetes refuses a JSON object that names a key twice; Python keeps the last."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _DuplicateKey
    return obj


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotJson(f"number {text} is out of range")
    return value


class _JsonReader:
    """Decodes a JSON text one value at a time; a top-level object's `items` array is
    handed on item by item."""

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.pos = 0
        self.decoder = json.JSONDecoder(parse_constant=_not_json, parse_float=_finite_float,
                                        object_pairs_hook=_unique_keys)

    def fail(self, message: str, pos: int) -> InputFileError:
        line, col = _line_col(self.text, pos)
        return InputFileError(message, where=f"{self.name}:{line}:{col}")

    def duplicate(self, key: str, pos: int, first: int) -> InputDecodeError:
        line, col = _line_col(self.text, pos)
        return InputDecodeError(duplicate_key_message(key, _line_col(self.text, first)[0]),
                                file=self.name, line=line, column=col,
                                rule="yaml-duplicate-key")

    def skip_ws(self) -> None:
        m = _JSON_WS.match(self.text, self.pos)
        assert m is not None  # the pattern matches the empty string
        self.pos = m.end()

    def value(self) -> Any:
        self.skip_ws()
        try:
            value, self.pos = self.decoder.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.fail(f"invalid JSON: {exc.msg}", exc.pos) from None
        except RecursionError:
            raise self.fail("invalid JSON: nested too deeply to read", self.pos) from None
        except _NotJson as exc:
            raise self.fail(f"invalid JSON: {exc}", self.pos) from None
        except _DuplicateKey:
            raise self.locate_duplicate(self.pos) from None
        except ValueError:  # Python converts integers of at most 4300 digits
            raise self.fail("invalid JSON: a number with thousands of digits",
                            self.pos) from None
        return value

    def locate_duplicate(self, start: int) -> InputDecodeError | InputFileError:
        """Where the value at `start` repeats a key: the fast decoder only says that it
        does, so the value is scanned again by the pure-Python one, keys tracked."""
        try:
            _DuplicateFinder(self.text).scan(start)
        except _Found as found:
            return self.duplicate(found.key, found.pos, found.first)
        except (RecursionError, ValueError):
            pass
        return self.fail("invalid JSON: a key is defined twice", start)

    def expect(self, chars: str) -> str:
        self.skip_ws()
        ch = self.text[self.pos:self.pos + 1]
        if not ch or ch not in chars:
            found = repr(ch) if ch else "end of file"
            wanted = " or ".join(repr(c) for c in chars)
            raise self.fail(f"invalid JSON: expected {wanted}, found {found}", self.pos)
        self.pos += 1
        return ch

    def end(self) -> None:
        self.skip_ws()
        if self.pos != len(self.text):
            raise self.fail("invalid JSON: extra data after the top-level value", self.pos)

    def whole(self) -> Any:
        value = self.value()
        self.end()
        return value

    def objects(self) -> Iterator[tuple[str, Any]]:
        where = f"{self.name} (document 1)"
        self.skip_ws()
        if not self.text.startswith("{", self.pos):
            yield from list_items(self.whole(), where)
            return
        # A top-level object, read member by member so that `items` streams.
        self.pos += 1
        fields: dict[str, Any] = {}
        key_at: dict[str, int] = {}
        streamed = 0
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
        else:
            while True:
                self.skip_ws()
                key_pos = self.pos
                key = self.value()
                if not isinstance(key, str):
                    raise self.fail("invalid JSON: object keys must be strings", key_pos)
                if key in key_at:  # a second `items` would load both arrays
                    raise self.duplicate(key, key_pos, key_at[key])
                key_at[key] = key_pos
                self.expect(":")
                self.skip_ws()
                if key == "items" and self.text.startswith("[", self.pos):
                    for item in self.array():
                        yield f"{where} items[{streamed}]", item
                        streamed += 1
                    fields[key] = []
                else:
                    fields[key] = self.value()
                if self.expect(",}") == "}":
                    break
        self.end()
        kind = fields.get("kind")
        if "items" in fields and kind not in LIST_KINDS and kind is not None:
            raise InputFileError(f"a {kind} with items: expected a List", where=where)
        if "items" not in fields:
            yield from list_items(fields, where)

    def array(self) -> Iterator[Any]:
        self.pos += 1  # the "["
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.expect(",]") == "]":
                return


class _Found(Exception):
    def __init__(self, key: str, pos: int, first: int) -> None:
        self.key, self.pos, self.first = key, pos, first


class _DuplicateFinder:
    """The pure-Python JSON scanner with an object parser that knows where each key is
    (error path only: it is several times slower than the C decoder)."""

    def __init__(self, text: str) -> None:
        decoder = json.JSONDecoder()
        decoder.parse_object = self.parse_object  # type: ignore[attr-defined]
        # Not in the typeshed stubs: the pure-Python scanner, which calls back into
        # `parse_object` for every object (the C one does not).
        self.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
        self.text = text

    def scan(self, start: int) -> None:
        self.scan_once(self.text, start)

    def parse_object(self, s_and_end: tuple[str, int], strict: bool, scan_once: Any,
                     *_hooks: Any) -> tuple[dict[str, Any], int]:
        s, end = s_and_end
        seen: dict[str, int] = {}
        end = _JSON_WS.match(s, end).end()  # type: ignore[union-attr]
        if s.startswith("}", end):
            return {}, end + 1
        while True:
            if not s.startswith('"', end):
                raise ValueError("not a key")
            key, after = json.decoder.scanstring(s, end + 1, strict)  # type: ignore[attr-defined]
            if key in seen:
                raise _Found(key, end, seen[key])
            seen[key] = end
            end = _JSON_WS.match(s, after).end()  # type: ignore[union-attr]
            if not s.startswith(":", end):
                raise ValueError("no colon")
            end = _JSON_WS.match(s, end + 1).end()  # type: ignore[union-attr]
            _, end = scan_once(s, end)
            end = _JSON_WS.match(s, end).end()  # type: ignore[union-attr]
            if s.startswith("}", end):
                return {}, end + 1
            if not s.startswith(",", end):
                raise ValueError("no comma")
            end = _JSON_WS.match(s, end + 1).end()  # type: ignore[union-attr]


# YAML -----------------------------------------------------------------------------------

# What `kubectl get -o yaml` prints for a List: top-level keys at column 0 in sorted order,
# `items:` followed by block sequence entries at column 0.
_KUBECTL_LIST = re.compile(r"(?:(?:#[^\n]*)?\n)*apiVersion: [^\n]*\nitems:[ \t]*\n-[ \n]")
# Line-start patterns are written as "\n..." rather than "^..." with re.M: a literal first
# character lets the regex engine skip ahead with a fast search (ten times faster on a
# large file); the first line is checked on its own where it matters.
_ITEM_START = re.compile(r"\n-(?=[ \n])")
# Lines at column 0 that end the items: another top-level key.
_TOP_LEVEL = re.compile(r"\n(?:[^\s#-]|-[^ \n])")
_MARKERS = re.compile(r"\n(?:---|\.\.\.|%)")
# Each level of block nesting takes at least one character of a line's indentation and
# block indicators; only where a line has a long run of them (deeper than any real object)
# is the parsed data's depth measured exactly. Flow nesting is limited by the parser.
_DEEP_LINE = re.compile(rf"\n[ \t\-?:]{{{MAX_DEPTH // 4},}}")
_YAML_ERROR = re.compile(r"line (\d+), column (\d+)")


def _yaml_loads(text: str) -> Any:
    # yaml_rs only for YAML data files: `policyd lint` imports this module without them.
    import yaml_rs

    return yaml_rs.loads(
        text, parse_datetime=False,
        alias_limits=yaml_rs.AliasLimits(max_total_replayed_events=MAX_ALIAS_EVENTS))


def _yaml_error(exc: Exception, name: str, first_line: int = 1) -> InputFileError:
    """yaml-rs's multi-line report as one line: FILE:LINE:COL: invalid YAML: what."""
    text = str(exc)
    lines = [s for s in text.splitlines() if s.strip()]
    what = lines[-1].strip() if lines else "unreadable YAML"
    if "alias replay limit" in text or "alias expansion" in what:
        what = (f"aliases expand to more than {MAX_ALIAS_EVENTS} nodes (an alias bomb?); "
                "write the objects out")
    elif "recursion limit" in text or "depth" in what:
        what = f"nesting deeper than the limit of {MAX_DEPTH} levels"
    m = _YAML_ERROR.search(text)
    where = f"{name}:{int(m[1]) + first_line - 1}:{m[2]}" if m else name
    return InputFileError(f"invalid YAML: {what}", where=where)


def tab_in_indentation(text: str, error_line: int) -> tuple[int, int] | None:
    """(line, column) of the first tab used for indentation at or before a parser's
    error line: both parsers stop somewhere after it, with words of their own."""
    start = 0
    for number in range(1, error_line + 1):
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        stripped = line.lstrip(" \t")
        indent = line[: len(line) - len(stripped)]
        if "\t" in indent and stripped.strip() and not stripped.startswith("#"):
            return number, indent.index("\t") + 1
        if end < 0:
            break
        start = end + 1
    return None


def _tab_problem(text: str, name: str, exc: Exception) -> InputDecodeError | None:
    m = _YAML_ERROR.search(str(exc))
    tab = tab_in_indentation(text, int(m[1])) if m and "tab" in str(exc) else None
    if tab is None:
        return None
    return InputDecodeError(TAB_MESSAGE, file=name, line=tab[0], column=tab[1],
                            rule="yaml-tab")


def _key_problem(text: str, name: str, exc: Exception | None = None,
                 first_line: int = 1) -> InputDecodeError | None:
    """A duplicate key (what `exc` says) or a merge key in `text`, at line:column."""
    if exc is not None and "duplicate" not in str(exc):
        return None
    found = find_key_problem(text, _may_hold_key_problem, first_line)
    return None if found is None else _key_error(found, name)


def _key_error(found: KeyProblem, name: str) -> InputDecodeError:
    return InputDecodeError(found.message, file=name, line=found.line, column=found.column,
                            rule=found.rule)


def _may_hold_key_problem(piece: str) -> bool:
    # yaml_rs only for YAML data files: `policyd lint` imports this module without them.
    import yaml_rs

    if has_merge_key(piece):
        return True
    try:
        _yaml_loads(piece)
    except yaml_rs.YAMLDecodeError as exc:
        return "duplicate" in str(exc)
    return False


def _refuse_merge_keys(text: str, name: str, first_line: int = 1) -> None:
    """yaml-rs (YAML 1.2) reads `<<` as a plain key; Kubernetes' YAML library (go-yaml
    v2) merges it, with rules of its own. Refused, as in policies and profiles, rather
    than read one way here and another by kubectl."""
    if not has_merge_key(text):
        return
    found = find_key_problem(text, has_merge_key, first_line)
    if found is not None:
        raise _key_error(found, name)


def _check_depth(value: Any, text: str, name: str, first_line: int = 1) -> None:
    """Block nesting is limited only by indentation, so the parser accepts any depth;
    measure it, but only where a line is indented deeply enough to exceed the limit."""
    m = _DEEP_LINE.search("\n" + text[:MAX_DEPTH]) or _DEEP_LINE.search(text)
    if m is None:
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            line, _ = _line_col(text, m.start() + 1)
            raise InputFileError(f"nesting deeper than the limit of {MAX_DEPTH} levels",
                                 where=f"{name}:{line + first_line - 1}:1")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _yaml_documents(text: str, name: str) -> list[Any]:
    # yaml_rs only for YAML data files: `policyd lint` imports this module without them.
    import yaml_rs

    try:
        loaded = _yaml_loads(text)
    except yaml_rs.YAMLDecodeError as exc:
        raise (_key_problem(text, name, exc) or _tab_problem(text, name, exc)
               or _yaml_error(exc, name)) from None
    except RecursionError:
        raise InputFileError(f"invalid YAML: nesting deeper than the limit of {MAX_DEPTH} "
                             "levels", where=name) from None
    _check_depth(loaded, text, name)
    _refuse_merge_keys(text, name)
    # One document loads as its value, several as a list of them (an empty one as None);
    # a single document that is itself a list is told apart by the explicit markers.
    if isinstance(loaded, list) and _has_markers(text) and _document_count(text) > 1:
        docs = loaded
    else:
        docs = [loaded]
    return [d for d in docs if d is not None]


def _has_markers(text: str) -> bool:
    return text.startswith(("---", "...", "%")) or _MARKERS.search(text) is not None


def _document_count(text: str) -> int:
    return text.count("\n---") + (
        1 if text.startswith("---") or not re.match(r"\s*(?:#[^\n]*\n\s*)*---", text)
        else 0)


class _YamlListReader:
    """A List in kubectl's layout, cut into its items at `- ` lines in column 0.

    Such a line always starts a new entry of the top-level sequence: an item's own content
    is indented (block scalars and multi-line flow scalars included), so the cut items
    parse exactly as they would inside the whole file. Anything the cut cannot vouch for
    (document markers, an anchor used across items) makes the file be parsed whole.
    """

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name

    def objects(self) -> Iterator[tuple[str, Any]]:
        text = self.text
        start = text.index("\nitems:") + 1
        first = _ITEM_START.search(text, start - 1)
        assert first is not None  # guaranteed by _KUBECTL_LIST
        trailer = _TOP_LEVEL.search(text, first.end())
        end = trailer.start() + 1 if trailer else len(text)
        if _has_markers(text):
            yield from self.whole()
            return
        fields = self.parse_header(text[:start] + text[end:])
        if fields is None or fields.get("kind") not in (*LIST_KINDS, None):
            yield from self.whole()
            return
        where = f"{self.name} (document 1)"
        index = 0
        try:
            for items in self.parsed(first.start() + 1, end):
                for item in items:
                    yield f"{where} items[{index}]", item
                    index += 1
        except _CutFailed:
            # Parse the whole file for the true error (or content, such as an anchor used
            # across items). The caller stops at the first error, so nothing is read twice.
            yield from self.whole()

    def whole(self) -> Iterator[tuple[str, Any]]:
        for d, doc in enumerate(_yaml_documents(self.text, self.name)):
            yield from list_items(doc, f"{self.name} (document {d + 1})")

    def parse_header(self, header: str) -> dict[str, Any] | None:
        """The List's own fields (`kind: List`, `metadata`), or None when they do not
        parse on their own (the whole file is parsed then, for the true error)."""
        # yaml_rs only for YAML data files: `policyd lint` imports this module without them.
        import yaml_rs

        try:
            fields = _yaml_loads(header.replace("\nitems:", "\nitems: []", 1))
        except yaml_rs.YAMLDecodeError:
            return None
        return fields if isinstance(fields, dict) else None

    def parsed(self, start: int, end: int) -> Iterator[list[Any]]:
        """Each batch of items parsed, in order; in a pool when the file is large."""
        batches = self.batches(start, end)
        if end - start < _PARALLEL_FROM_BYTES or (os.cpu_count() or 1) < 2:
            for first_line, chunk in batches:
                yield self.parse(first_line, chunk)
            return
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="yaml") as pool:
            pending: deque[Future[list[Any]]] = deque()
            try:
                for first_line, chunk in batches:
                    pending.append(pool.submit(self.parse, first_line, chunk))
                    if len(pending) >= _IN_FLIGHT:
                        yield pending.popleft().result()
                while pending:
                    yield pending.popleft().result()
            finally:
                for f in pending:
                    f.cancel()

    def batches(self, start: int, end: int) -> Iterator[tuple[int, str]]:
        text = self.text
        line = text.count("\n", 0, start) + 1
        cuts = [start] + [m.start() + 1 for m in _ITEM_START.finditer(text, start, end)]
        cuts.append(end)
        for i in range(0, len(cuts) - 1, _BATCH_ITEMS):
            a, b = cuts[i], cuts[min(i + _BATCH_ITEMS, len(cuts) - 1)]
            chunk = text[a:b]
            yield line, chunk
            line += chunk.count("\n")

    def parse(self, first_line: int, chunk: str) -> list[Any]:
        # yaml_rs only for YAML data files: `policyd lint` imports this module without them.
        import yaml_rs

        try:
            items = _yaml_loads(chunk)
        except yaml_rs.YAMLDecodeError as exc:
            # The items parse on their own as in the whole file: a key repeated in one
            # is found here, in a piece small enough to locate it quickly.
            raise _key_problem(chunk, self.name, exc, first_line) or _CutFailed() from None
        except RecursionError:
            raise _CutFailed from None
        if not isinstance(items, list):
            raise _CutFailed
        _check_depth(items, chunk, self.name, first_line)
        _refuse_merge_keys(chunk, self.name, first_line)
        return items


class _CutFailed(Exception):
    """A cut-out part did not parse as items on its own."""
