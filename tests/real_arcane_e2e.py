"""`make e2e`: the client scenarios that are safe on a real Arcane (ARCANE_URL and
ARCANE_API_KEY of a real instance), through a real MCP session over stdio, per surface and
protocol era. Nothing here changes state: destructive calls are made without confirm and
must be refused before anything is sent. Not collected by `make test` (file name).
"""

from __future__ import annotations

import os

import pytest

from tests.test_e2e import ERAS, SURFACES, Caller, session, text

pytestmark = pytest.mark.anyio
URL, KEY = os.environ.get("ARCANE_URL", ""), os.environ.get("ARCANE_API_KEY", "")


@pytest.fixture(autouse=True)
def _need_real_arcane():
    assert URL and KEY, "make e2e needs ARCANE_URL and ARCANE_API_KEY of a real Arcane"


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_read_only_scenarios(surface, era):
    async with session(URL, KEY, surface, era) as client:
        call = Caller(client, surface)
        res = await call("environment.list")
        assert not res.is_error, text(res)
        res = await call("container.list", {"limit": 5})
        assert not res.is_error, text(res)
        items = res.structured_content["items"]
        if items:
            first = items[0]
            res = await call("container.get", {"containerId": first["id"]})
            assert not res.is_error and res.structured_content["id"] == first["id"], text(res)
            res = await call("container.delete", {"containerId": first["id"]})
            assert res.is_error and "confirm: true" in text(res)
        res = await call("container.get", {"containerId": "no-such-container-arcane-mcp-e2e"})
        assert res.is_error and call.name("container.list") in text(res)
        res = await call("container.list", {"limit": "many"})
        assert res.is_error and "'limit' must be integer" in text(res)
        res = await call("version.get")
        assert not res.is_error, text(res)
