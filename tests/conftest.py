"""Shared test configuration: paths and helpers used across layers."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROFILES = REPO / "profiles"
