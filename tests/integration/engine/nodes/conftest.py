"""Factories for node-execution tests with real subprocesses."""

from __future__ import annotations

from tests.unit.engine.nodes.conftest import MakeContext, fake_providers, make_ctx

__all__ = ["MakeContext", "fake_providers", "make_ctx"]
