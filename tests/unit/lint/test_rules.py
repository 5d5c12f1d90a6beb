"""The rule registry is complete and the docs' rule table is generated from it.

Which ids the code can emit is read from the source, not from a run: every string that
reaches a `rule` parameter (of `SourceDocument.problem`, `Problem`, the checks' `add`
helpers, a `report` callable, ...), directly or through a name bound to a string.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import cache
from pathlib import Path

from policyd.cli import doc_blocks
from policyd.lint import rules

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "policy-language.md"

RULE_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _rule_positions(trees: dict[Path, ast.Module]) -> dict[str, set[int]]:
    """Callable name -> positions of its `rule` argument (functions and dataclasses)."""
    out: dict[str, set[int]] = defaultdict(set)
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
                if "rule" in params:
                    skip = 1 if params and params[0] in ("self", "cls") else 0
                    out[node.name].add(params.index("rule") - skip)
            elif isinstance(node, ast.ClassDef):
                fields = [s.target.id for s in node.body
                          if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
                if "rule" in fields:
                    out[node.name].add(fields.index("rule"))
    return out


def _strings_assigned(tree: ast.Module) -> dict[str, set[str]]:
    out: dict[str, set[str]] = defaultdict(set)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id].add(node.value.value)
    return out


@cache
def emitted_rule_ids(package: Path) -> dict[str, str]:
    """Rule id -> the first place (file:line) that passes it to a problem."""
    trees = {p: ast.parse(p.read_text(), str(p)) for p in sorted(package.rglob("*.py"))}
    positions = _rule_positions(trees)
    # Callables passed around as values: `policyd.config.plugins.Report`.
    positions["report"].add(1)
    constants: dict[str, set[str]] = defaultdict(set)  # names bound to strings anywhere
    for tree in trees.values():
        for name, values in _strings_assigned(tree).items():
            constants[name] |= values
    found: dict[str, str] = {}
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else None
            if called is None or called not in positions:
                continue
            name = called
            starred = next((i for i, a in enumerate(node.args)
                            if isinstance(a, ast.Starred)), len(node.args))
            args = [node.args[i] for i in positions[name] if i < starred]
            # After a `*pos`, positions are unknown: take the literal arguments only.
            args += [a for a in node.args[starred:]
                     if any(i >= starred for i in positions[name])
                     and isinstance(a, ast.Constant)]
            args += [k.value for k in node.keywords if k.arg == "rule"]
            for arg in args:
                for sub in ast.walk(arg):
                    values = set()
                    if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                        values = {sub.value}
                    elif isinstance(sub, ast.Name):
                        values = constants.get(sub.id, set())
                    for v in values:
                        if RULE_ID.match(v):
                            found.setdefault(v, f"{path.relative_to(package.parent)}:{node.lineno}")
    return found



def test_every_emitted_rule_id_is_registered() -> None:
    emitted = emitted_rule_ids(ROOT / "policyd")
    unregistered = {i: at for i, at in emitted.items() if i not in rules.BY_ID}
    assert unregistered == {}, "register these in policyd/lint/rules.py"


def test_every_registered_rule_id_is_emitted() -> None:
    emitted = emitted_rule_ids(ROOT / "policyd")
    assert [r.id for r in rules.RULES if r.id not in emitted] == []


def test_the_scan_finds_ids_however_they_are_passed() -> None:
    emitted = emitted_rule_ids(ROOT / "policyd")
    # a literal, a literal after `*pos`, a module constant, a local variable
    for rule_id in ("not-a-policy", "yaml-ambiguous", "plugin-unknown", "leader-election"):
        assert rule_id in emitted


def test_rule_ids_are_unique_and_levels_known() -> None:
    assert len(rules.BY_ID) == len(rules.RULES)
    assert all(r.levels and set(r.levels) <= {"error", "warning"} for r in rules.RULES)


def test_docs_rule_table_is_generated_from_the_registry() -> None:
    found = doc_blocks.block_pattern("lint-rules").search(DOCS.read_text())
    assert found is not None, "docs/policy-language.md lost its lint-rules block"
    body = found.group(0).split("\n", 1)[1].rsplit("\n", 1)[0] + "\n"
    assert body == rules.markdown(), "regenerate: python -m policyd.cli.doc_blocks"
