"""Shared fixtures. Tests that need Arcane start the simulator themselves on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from interpreter import ROOT_DIR
from interpreter.auditlog import AuditLog
from interpreter.catalog import BuildOptions, build
from interpreter.config import Settings
from interpreter.dispatch import Dispatcher
from interpreter.request import ArcaneClient

SHARED_DIR = ROOT_DIR.parent / "shared"


@pytest.fixture(scope="session")
def catalog():
    return build()


@pytest.fixture
def anyio_backend():
    return "asyncio"
