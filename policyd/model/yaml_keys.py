"""Where a YAML text repeats a key or uses a merge key (`<<`), at line and column.

The fast YAML parser of data files (yaml-rs) refuses a duplicate key without saying
where it is, and reads `<<` as an ordinary key. Policies, profiles and policy tests are
loaded with positions (`policyd.sourcefile`) and report both at file:line:column; so
that a snapshot says the same, the text is scanned again here with ruamel.yaml's event
parser, which knows positions. That parser is slow (tens of KB per second), so only
small pieces are scanned: a large text is cut into its column-0 sequence entries (a
kubectl List's items) and its documents, the pieces that fail or hold a `<<:` are
scanned, and the rest of the text (a List's own fields) is scanned with the pieces
blanked out, line numbers kept. Only error paths and texts holding `<<:` come here.

The messages are the ones every file kind uses (`policyd.sourcefile` imports them).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MERGE_KEY_MESSAGE = "merge keys (<<) are not supported: write the fields out"
# A piece bigger than this is not scanned (seconds of pure-Python parsing): the problem
# is then reported without a line, naming the key.
LOCATE_MAX_CHARS = 256 * 1024

# `<<` followed by `:` as a key may be written: in block style at a line's start (after
# indentation or `- `), in flow style after `{` or `,`. A heredoc `cat <<EOF` is not one.
MERGE_KEY = re.compile(r"(?:^|[\s{,?-])<<[ \t]*:(?=[\s]|$)", re.M)
_CUT = re.compile(r"^(?:- |-$|---|\.\.\.)", re.M)
_COLUMN0_KEY = re.compile(r"^[^\s#-]", re.M)


def has_merge_key(text: str) -> bool:
    """Whether `text` may use a merge key. The regex alone takes seconds on a 70 MB
    snapshot (its first character is not a literal); the substring test takes tens of
    milliseconds and rules out nearly every file."""
    return "<<" in text and MERGE_KEY.search(text) is not None


def duplicate_key_message(key: str, first_line: int) -> str:
    return f"duplicate key {key!r} (first defined at line {first_line})"


@dataclass(frozen=True, slots=True)
class KeyProblem:
    line: int
    column: int
    message: str
    rule: str  # yaml-duplicate-key or yaml-merge-key, as the policy loader names them


def find_key_problem(text: str, suspicious: Callable[[str], bool],
                     first_line: int = 1) -> KeyProblem | None:
    """The first duplicate or merge key in `text` (whose first line is `first_line` of
    its file), looked for in the pieces `suspicious` says may hold it; None when it is
    in no piece small enough to scan."""
    if len(text) <= LOCATE_MAX_CHARS:
        return _scan(text, first_line)
    pieces = _pieces(text)
    candidates = [(text[a:b], first_line + text.count("\n", 0, a)) for a, b in pieces]
    candidates.append((_blanked(text, pieces), first_line))
    for piece, line in candidates:
        if len(piece) <= LOCATE_MAX_CHARS and suspicious(piece):
            found = _scan(piece, line)
            if found is not None:
                return found
    return None


def _blanked(text: str, pieces: list[tuple[int, int]]) -> str:
    """`text` without the pieces, each replaced by its line breaks (lines still count)."""
    out: list[str] = []
    pos = 0
    for start, end in pieces:
        out.append(text[pos:start])
        out.append("\n" * text.count("\n", start, end))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _pieces(text: str) -> list[tuple[int, int]]:
    """(start, end), in order, of each column-0 sequence entry (up to the next entry,
    marker or column-0 key) and of each document holding no such entry (between its
    markers, which stay out: the rest keeps the documents apart)."""
    cuts = [(m.start(), not text.startswith("---", m.start())
             and not text.startswith("...", m.start())) for m in _CUT.finditer(text)]
    pieces: list[tuple[int, int]] = []
    for i, (start, is_entry) in enumerate(cuts):
        if is_entry:
            end = cuts[i + 1][0] if i + 1 < len(cuts) else len(text)
            key = _COLUMN0_KEY.search(text, start + 1, end)
            pieces.append((start, key.start() if key else end))
    entries = [start for start, is_entry in cuts if is_entry]
    markers = [start for start, is_entry in cuts if not is_entry]
    starts = [0] + [text.find("\n", m) + 1 or len(text) for m in markers]
    for a, b in zip(starts, [*markers, len(text)], strict=True):
        i = bisect.bisect_left(entries, a)
        if a < b and (i == len(entries) or entries[i] >= b):
            pieces.append((a, b))
    return sorted(pieces)


def _scan(text: str, first_line: int) -> KeyProblem | None:
    # ruamel.yaml only on these error paths: the fast loaders never import it.
    from ruamel.yaml import YAML
    from ruamel.yaml import events as ev
    from ruamel.yaml.error import YAMLError

    # Per open collection: a mapping's keys so far (key -> line) and whether its next
    # node is a key; None for a sequence.
    stack: list[list[Any] | None] = []

    def consumed() -> None:
        top = stack[-1] if stack else None
        if top is not None:
            top[1] = not top[1]

    try:
        for event in YAML(typ="safe", pure=True).parse(text):
            if isinstance(event, ev.DocumentStartEvent):
                stack = []
            elif isinstance(event, ev.MappingStartEvent | ev.SequenceStartEvent):
                consumed()
                stack.append([{}, True] if isinstance(event, ev.MappingStartEvent) else None)
            elif isinstance(event, ev.MappingEndEvent | ev.SequenceEndEvent):
                stack.pop()
            elif isinstance(event, ev.ScalarEvent | ev.AliasEvent):
                top = stack[-1] if stack else None
                if top is not None and top[1] and isinstance(event, ev.ScalarEvent):
                    line = event.start_mark.line + first_line
                    column = event.start_mark.column + 1
                    if event.value == "<<" and event.style is None and event.tag is None:
                        return KeyProblem(line, column, MERGE_KEY_MESSAGE, "yaml-merge-key")
                    if event.value in top[0]:
                        return KeyProblem(line, column,
                                          duplicate_key_message(event.value,
                                                                top[0][event.value]),
                                          "yaml-duplicate-key")
                    top[0][event.value] = line
                consumed()
    except YAMLError:
        return None
    return None
