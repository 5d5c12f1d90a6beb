"""semver(): blang/semver's strict parse, its texts, its order, and normalization."""

from __future__ import annotations

import pytest

from policyd.cel.semver import SemverParseError, compare, parse, parse_normalized


@pytest.mark.parametrize(("low", "high"), [
    ("1.0.0", "2.0.0"),
    ("1.2.0", "1.10.0"),
    ("1.0.9", "1.0.10"),
    ("1.0.0-alpha", "1.0.0"),
    ("1.0.0-alpha", "1.0.0-alpha.1"),
    ("1.0.0-alpha.1", "1.0.0-alpha.beta"),  # numeric before alphanumeric
    ("1.0.0-alpha.2", "1.0.0-alpha.10"),  # numbers compare as numbers
    ("1.0.0-beta", "1.0.0-rc"),
])
def test_order(low: str, high: str) -> None:
    assert compare(parse(low), parse(high)) == -1
    assert compare(parse(high), parse(low)) == 1


def test_build_metadata_does_not_count() -> None:
    assert compare(parse("1.0.0+a"), parse("1.0.0+b")) == 0
    assert parse("1.0.0+a.b").build == ("a", "b")
    assert parse("1.0.0+a").canonical() == "1.0.0"


@pytest.mark.parametrize(("text", "error"), [
    ("", "Version string empty"),
    ("1.0", "No Major.Minor.Patch elements found"),
    ("a.0.0", 'Invalid character(s) found in major number "a"'),
    ("01.0.0", 'Major number must not contain leading zeroes "01"'),
    ("1.x.0", 'Invalid character(s) found in minor number "x"'),
    ("1.0.0x", 'Invalid character(s) found in patch number "0x"'),
    ("1.0.01", 'Patch number must not contain leading zeroes "01"'),
    ("1..0", 'strconv.ParseUint: parsing "": invalid syntax'),
    ("1.0.0-", "Prerelease is empty"),
    ("1.0.0-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("1.0.0-a_b", 'Invalid character(s) found in prerelease "a_b"'),
    ("1.0.0+", "Build meta data is empty"),
    ("1.0.0+a$", 'Invalid character(s) found in build meta data "a$"'),
    ("99999999999999999999.0.0",
     'strconv.ParseUint: parsing "99999999999999999999": value out of range'),
])
def test_errors(text: str, error: str) -> None:
    with pytest.raises(SemverParseError) as err:
        parse(text)
    assert str(err.value) == error


@pytest.mark.parametrize(("text", "canonical"), [
    ("v1.2.3", "1.2.3"),
    ("1.2", "1.2.0"),
    ("1", "1.0.0"),
    ("01.02.03", "1.2.3"),
    ("v1.0.0-rc.1", "1.0.0-rc.1"),
])
def test_normalized(text: str, canonical: str) -> None:
    assert parse_normalized(text).canonical() == canonical


def test_short_version_with_prerelease_is_refused() -> None:
    with pytest.raises(SemverParseError, match="short version cannot contain PreRelease/Build"):
        parse_normalized("1.0-rc")
