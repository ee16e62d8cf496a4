"""Helpers shared by unit tests (an in-memory Arcane through httpx.MockTransport)."""

from __future__ import annotations

import httpx

from interpreter.auditlog import AuditLog
from interpreter.config import Settings
from interpreter.dispatch import Dispatcher
from interpreter.request import ArcaneClient


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
