"""Planner properties (hypothesis) and the capacity model's arithmetic."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from console.config.profile_file import write_split
from console.operations.capacity import PointStore, model_for, need_for_one_request
from console.operations.planner import SlotInput, plan
from pod_agent.profile import MAX_GPU_UTIL_PER_GPU
from pod_agent.profiles import load_profile
from tests.conftest import PROFILES

FIELD = load_profile(PROFILES / "10-rtx6000-2x.yaml")


def test_field_numbers_give_57k_tokens_per_001() -> None:
    m = model_for("FLASH", FIELD.slots["FLASH"], [(0.76, 239_000), (0.78, 353_000)])
    assert m.slope is not None and round(m.slope / 100) == 57_000
    assert m.tokens_at(0.77) == 296_000  # the field measured 296k at 0.77
    least = m.util_for(need_for_one_request(FIELD.slots["FLASH"]))
    assert least is not None and 0.74 < least < 0.75


def test_one_point_plus_weights_estimate() -> None:
    # 96 GB cards: 0.76 × 95.6 GiB − 81/2 GiB of weights = KV for 239k tokens
    m = model_for("FLASH", FIELD.slots["FLASH"], [(0.76, 239_000)], gpu_mem_gib=95.6)
    assert m.slope is not None and "1 point + weights" in m.how
    assert m.tokens_at(0.78) > 239_000


def test_points_survive_restarts(tmp_path: Path) -> None:
    PointStore(tmp_path, "p").add("FLASH", 0.76, 239_000)
    PointStore(tmp_path, "p").add("FLASH", 0.77, 296_000)
    assert PointStore(tmp_path, "p").points("FLASH") == [(0.76, 239_000), (0.77, 296_000)]


def _inputs(kv: tuple[float, float], mins: tuple[float, float], prio: tuple[int, int]
            ) -> list[SlotInput]:
    flash = model_for("FLASH", FIELD.slots["FLASH"], [(0.76, 239_000), (0.78, 353_000)])
    q27 = model_for("Q27", FIELD.slots["Q27"], [(0.18, 153_000), (0.19, 190_000)])
    return [SlotInput("FLASH", 0.76, kv[0], flash, mins[0], prio[0], (0, 1)),
            SlotInput("Q27", 0.19, kv[1], q27, mins[1], prio[1], (0, 1))]


kv_st = st.floats(min_value=0.0, max_value=0.3)
min_st = st.floats(min_value=0.01, max_value=0.3)
prio_st = st.integers(0, 10)


@settings(max_examples=300, deadline=None)
@given(kv_st, kv_st, min_st, min_st, prio_st, prio_st)
def test_never_over_095_per_gpu_and_never_under_a_minimum(k1, k2, m1, m2, p1, p2) -> None:
    p = plan(FIELD, _inputs((k1, k2), (m1, m2), (p1, p2)))
    if p.feasible:
        assert p.split["FLASH"] + p.split["Q27"] <= MAX_GPU_UTIL_PER_GPU + 1e-9
        assert p.split["FLASH"] >= m1 - 1e-9 and p.split["Q27"] >= m2 - 1e-9
    else:
        assert p.split == {"FLASH": 0.76, "Q27": 0.19}  # nothing changes when nothing fits


@settings(max_examples=300, deadline=None)
@given(kv_st, st.floats(min_value=0.0, max_value=0.1), kv_st, prio_st, prio_st)
def test_more_demand_never_yields_less_util(k1, extra, k2, p1, p2) -> None:
    a = plan(FIELD, _inputs((k1, k2), (0.01, 0.01), (p1, p2)))
    b = plan(FIELD, _inputs((k1 + extra, k2), (0.01, 0.01), (p1, p2)))
    if a.feasible and b.feasible:
        assert b.split["FLASH"] >= a.split["FLASH"] - 1e-9


def test_every_number_is_explained() -> None:
    p = plan(FIELD, _inputs((0.05, 0.02), (0.74, 0.17), (10, 5)))
    assert p.feasible and len(p.lines) == 2
    for line in p.lines:
        assert "→" in line and "at least" in line and "priority" in line and "KV" in line
        assert "floor" not in line and "capacity model" not in line  # no jargon


def test_profile_file_rewrite_keeps_comments_and_backs_up(tmp_path: Path) -> None:
    prof = tmp_path / "10-rtx6000-2x.yaml"
    prof.write_text((PROFILES / "10-rtx6000-2x.yaml").read_text())
    msg = write_split(prof, {"FLASH": 0.75, "Q27": 0.20}, tmp_path / "bk")
    text = prof.read_text()
    assert "gpu_util: 0.75" in text and "gpu_util: 0.2\n" in text
    assert "# 0.15 failed" in text  # comments kept
    assert "saved with FLASH at 0.75, Q27 at 0.20" in msg and "gpu_util:" not in msg
    (backup,) = (tmp_path / "bk").iterdir()
    assert "gpu_util: 0.76" in backup.read_text()
    import pytest
    with pytest.raises(ValueError, match="does not validate"):
        write_split(prof, {"FLASH": 0.90}, tmp_path / "bk")  # 0.90 + 0.20 > 0.95
    assert "gpu_util: 0.75" in prof.read_text()  # left intact
