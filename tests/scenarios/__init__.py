"""End-to-end scenarios, written once, run against two targets:

    the simulator     `make test` (tests/test_scenarios.py): every scenario runs
    a real Arcane     `make e2e` (tests/real_arcane_e2e.py, ARCANE_URL/ARCANE_API_KEY)

A scenario is an async function of (target, driver) registered with @scenario in one of
the modules below. It calls actions the way a model does, through the real dispatcher
and renderer (DispatchDriver) or a real MCP client session over stdio (McpDriver, per
surface), and asserts codes, fields and structure. A scenario that needs what a target
cannot give (faults on purpose, the requests it received, a login it may lock out)
declares it; on that target it is skipped with the target's reason, never on the
simulator. Write scenarios create only resources named with their own unique prefix and
remove them in `finally`, so they never touch anything they did not create.
"""
