"""YAML source files loaded with positions and safety limits (shared by every loader).

Policies, policy tests and profiles are all read through here, so every problem in any
of them can be reported as file:line:column plus a JSON path.
"""

from policyd.sourcefile.positioned_yaml import (
    DEFAULT_LIMITS,
    JsonPath,
    Limits,
    SourceDocument,
    SourceFile,
    SubDocument,
    format_path,
    load_bytes,
    load_file,
)

__all__ = [
    "DEFAULT_LIMITS",
    "JsonPath",
    "Limits",
    "SourceDocument",
    "SourceFile",
    "SubDocument",
    "format_path",
    "load_bytes",
    "load_file",
]
