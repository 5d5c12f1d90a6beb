"""The JSON Schema pieces the policy schema and its rule kinds' fragments are built from,
and `RuleKind`: what each rule kind declares about itself.

Kept apart from `policy_schema.py` so the rule kinds' declarations
(`policyd/policy/rules/filters/schemas.py`, `.../scores/schemas.py`) can use them while
`policy_schema` assembles the schema from those declarations; nothing here imports
more than the standard library and `model.int64` (which imports nothing), so `policyd
lint` stays as light as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policyd.model import int64

METRIC_NAME_PATTERN = "^[a-zA-Z_][a-zA-Z0-9_]*$"  # as in the profile's metricsProviders

# The largest magnitude of a score rule's raw value (policyd.policy.rules.normalization
# MAX_RAW_VALUE): 2^53, the last integer float64 holds exactly. Points a policy gives
# are bounded by it in the schema, values read from nodes when scored.
MAX_RAW_VALUE = 2**53
# Integers the API server stores (metadata.generation, a CRD's integer fields) are
# int64; counts such as maxPodsPerNode int32, as Kubernetes' own counts are.
INT32_MAX = int64.INT32_MAX
INT64_MIN, INT64_MAX = int64.INT64_MIN, int64.INT64_MAX

STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
STRINGS = {"type": "array", "items": {"type": "string"}}
QUANTITY = {"type": ["string", "number"],
            "description": "A Kubernetes quantity: 100m, 1Gi, 2, 1e3."}


def schema_object(properties: dict[str, Any], required: tuple[str, ...] = (),
                  description: str = "", **extra: Any) -> dict[str, Any]:
    """A strict JSON Schema object: these properties and no others."""
    out: dict[str, Any] = {"type": "object"}
    if description:
        out["description"] = description
    out["properties"] = properties
    if required:
        out["required"] = list(required)
    out["additionalProperties"] = False
    out.update(extra)
    return out


@dataclass(frozen=True, slots=True)
class RuleKind:
    """One kind of `filters[]` or `scores[]` rule as the schema and the docs show it.

    `name` is the key naming the kind in a rule; `schema` the JSON Schema of the value
    under it; `shape` (optional) the value's outline in the docs' kind column, after
    `name: `; `cells` the docs table's other columns; `example` one rule of the kind,
    as a YAML list item (a unit test lints and compiles each one)."""

    name: str
    schema: dict[str, Any]
    cells: tuple[str, ...]
    example: str
    shape: str = ""

    def table_row(self) -> str:
        """The kind's row of the docs' kind table."""
        kind = f"{self.name}: {self.shape}" if self.shape else self.name
        return "| " + " | ".join((f"`{kind}`", *self.cells)) + " |"
