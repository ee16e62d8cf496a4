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


class Recorder:
    """An in-memory Arcane for unit tests: answers from a handler, records requests."""

    def __init__(self, handler):
        self.handler = handler
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        return self.handler(request)


def make_dispatcher(catalog, handler, **settings_kw):
    settings = Settings(arcane_url="http://arcane.test", api_key="arc_test_key", audit_log="off", **settings_kw)
    rec = Recorder(handler)
    client = ArcaneClient(settings, transport=httpx.MockTransport(rec))
    return Dispatcher(catalog, settings, client, AuditLog("off")), rec


def ok_json(data, **extra):
    return httpx.Response(200, json={"success": True, "data": data, **extra})
