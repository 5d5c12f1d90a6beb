"""Semantic versions as Kubernetes' CEL `semver()` library and DRA's version attributes
read them: github.com/blang/semver/v4's strict parser (its error texts, which reach
users as CEL runtime errors), its ordering, and the library's optional normalization
(`semver("v1.2", true)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _NUMBERS
_MAX_UINT64 = 2**64 - 1


class SemverParseError(ValueError):
    """Not a semantic version; str() is blang/semver's text."""


@dataclass(frozen=True, slots=True)
class Version:
    major: int
    minor: int
    patch: int
    # Each pre-release identifier as (is numeric, number, text).
    pre: tuple[tuple[bool, int, str], ...]
    build: tuple[str, ...]

    def canonical(self) -> str:
        """One spelling per precedence class: build metadata does not count in
        comparisons (Version.Compare), so it is left out, and equal versions give
        equal strings."""
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(n) if num else s for num, n, s in self.pre)
        return text


def compare(a: Version, b: Version) -> int:
    """-1, 0 or 1 as blang/semver's Version.Compare."""
    for x, y in ((a.major, b.major), (a.minor, b.minor), (a.patch, b.patch)):
        if x != y:
            return 1 if x > y else -1
    if not a.pre or not b.pre:
        return (not a.pre) - (not b.pre)
    for (anum, an, as_), (bnum, bn, bs) in zip(a.pre, b.pre, strict=False):
        if anum != bnum:
            return -1 if anum else 1
        if anum and an != bn:
            return 1 if an > bn else -1
        if not anum and as_ != bs:
            return 1 if as_ > bs else -1
    return (len(a.pre) > len(b.pre)) - (len(a.pre) < len(b.pre))


@lru_cache(maxsize=4096)
def parse(text: str) -> Version:
    """blang/semver's Parse: MAJOR.MINOR.PATCH[-PRE][+BUILD], no leading zeros."""
    if not text:
        raise SemverParseError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverParseError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    patch_text = parts[2]
    build: list[str] = []
    pre_texts: list[str] = []
    if "+" in patch_text:
        patch_text, build_text = patch_text.split("+", 1)
        build = build_text.split(".")
    if "-" in patch_text:
        patch_text, pre_text = patch_text.split("-", 1)
        pre_texts = pre_text.split(".")
    patch = _number(patch_text, "patch")
    pre = tuple(_prerelease(p) for p in pre_texts)
    for b in build:
        if not b:
            raise SemverParseError("Build meta data is empty")
        if not set(b) <= _ALPHANUM:
            raise SemverParseError(f"Invalid character(s) found in build meta data {_quote(b)}")
    return Version(major, minor, patch, pre, tuple(build))


def parse_normalized(text: str) -> Version:
    """The library's `semver(s, true)`: a leading "v" dropped, leading zeros trimmed,
    missing minor/patch filled with 0, then parsed strictly."""
    if text.startswith("v"):
        text = text[1:]
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _NUMBERS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(c in parts[-1] for c in "+-"):
            raise SemverParseError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse(".".join(parts))


def _number(text: str, which: str) -> int:
    if not set(text) <= _NUMBERS:
        raise SemverParseError(f"Invalid character(s) found in {which} number {_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise SemverParseError(
            f"{which.capitalize()} number must not contain leading zeroes {_quote(text)}")
    return _uint64(text)


def _prerelease(text: str) -> tuple[bool, int, str]:
    if not text:
        raise SemverParseError("Prerelease is empty")
    if set(text) <= _NUMBERS:
        if len(text) > 1 and text[0] == "0":
            raise SemverParseError(
                f"Numeric PreRelease version must not contain leading zeroes {_quote(text)}")
        return True, _uint64(text), ""
    if set(text) <= _ALPHANUM:
        return False, 0, text
    raise SemverParseError(f"Invalid character(s) found in prerelease {_quote(text)}")


def _uint64(text: str) -> int:
    # strconv.ParseUint's errors: an empty number is a syntax error, a long one a range
    # error.
    if not text:
        raise SemverParseError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(text)
    if value > _MAX_UINT64:
        raise SemverParseError(f"strconv.ParseUint: parsing {_quote(text)}: value out of range")
    return value


def _quote(text: str) -> str:
    """Go's %q for the ASCII text these messages quote."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
