"""The snapshot bench's table (`bench.snapshot_bench.markdown`), from its JSON."""

from __future__ import annotations

from typing import Any

from bench.snapshot_bench import COLUMNS, markdown


def _fmt(file_mb: float, lo: float, med: float, hi: float, sim: float, rss: float
         ) -> dict[str, float]:
    return {"file_mb": file_mb, "load_min": lo, "load_median": med, "load_max": hi,
            "simulate_seconds": sim, "simulate_peak_rss_mb": rss}


DOC: dict[str, Any] = {
    "command": "python -m bench.snapshot_bench --sizes 10x200,5000x100000 --runs 3",
    "python": "3.11.7", "cpus": 2, "date": "2026-11-30",
    "rows": [
        {"nodes": 10, "pods": 200, "json": _fmt(1.6, 0.1234, 0.1251, 0.2, 1.04, 80.4),
         "yaml": _fmt(0.7, 0.15, 0.156, 0.161, 1.26, 75.6), "yaml_over_json": 1.2471},
        {"nodes": 5000, "pods": 100000,
         "json": _fmt(882.3, 13.116, 13.324, 15.597, 30.034, 3199.56),
         "yaml": _fmt(384.2, 13.777, 14.913, 15.868, 34.881, 2996.14),
         "yaml_over_json": 1.1193}]}


def test_header_rows_and_significant_figures() -> None:
    lines = markdown(DOC).splitlines()
    assert lines[0] == ("Measured 2026-11-30, Python 3.11.7, 2 CPUs: `python -m "
                        "bench.snapshot_bench --sizes 10x200,5000x100000 --runs 3`; load is "
                        "the median (min–max) of the runs, simulate one run.")
    assert lines[2] == "| " + " | ".join(COLUMNS) + " |"
    assert lines[3] == "|---|" + "---:|" * 6
    # Under 10 s two decimals, from 10 s one; memory in MiB, from 1024 MiB in GiB.
    assert lines[4] == ("| 10 nodes, 200 pods | 2 / 1 MiB | 0.13 s (0.12–0.20) | "
                        "0.16 s (0.15–0.16) | 1.25x | 1.0 s, 80 MiB | 1.3 s, 76 MiB |")
    assert lines[5] == ("| 5,000 nodes, 100,000 pods | 882 / 384 MiB | 13.3 s (13.1–15.6) | "
                        "14.9 s (13.8–15.9) | 1.12x | 30.0 s, 3.1 GiB | 34.9 s, 2.9 GiB |")
    assert len(lines) == 6
