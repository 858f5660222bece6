"""``python -m bench.fairness`` at a small size: both modes run, every document gets its receipt,
and the other tenants' documents wait less with fair share than behind the import without."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.fairness import EDIT, OTHERS, markdown, run
from tests.helpers import made_up_beir

pytestmark = pytest.mark.alone


async def test_the_fairness_bench_runs_both_modes_side_by_side(tmp_path: Path) -> None:
    args = argparse.Namespace(
        dataset=made_up_beir(tmp_path / "beir", 200, 1),
        documents=200,
        every_s=1.0,
        edit_every_s=2.0,
        timeout_s=600.0,
        set=[],
        also=[],
        out=tmp_path / "fairness.json",
    )

    off, on = await run(args)

    assert (off["fair_share"], on["fair_share"]) == (False, True)
    for mode in (off, on):
        assert mode["bulk_documents"] == 200
        for group in (*OTHERS, EDIT):
            assert mode[group]["documents"] > 0
            assert mode[group]["received"] == mode[group]["documents"], (group, mode)
    # Ratios in one run: behind the import, the other tenants' longest wait is most of the
    # drain; served in turn, a fraction of it.
    for group in OTHERS:
        assert on[group]["max_s"] < 0.6 * off[group]["max_s"], (group, off, on)
    assert "fair share" in markdown([off, on])
    assert (tmp_path / "fairness.json").exists()
