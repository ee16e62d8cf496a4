"""The live channel, GET /stream (behaviour data `live:`, live.yaml): Arcane's multiplexed
JSON-lines feed of the `environments`, `dashboard` and `activities` channels, and 2.14's
`version` channel (its form unverified: live.yaml says why).

One producer per requested channel (and per remote environment where Arcane polls one),
as Arcane's stream handler builds them; each writes envelopes {channel, <payload>,
timestamp} into one queue, and the writer adds a heartbeat on a fixed ticker. Arcane's
intervals (15 s heartbeat, 5 s environment poll, 15 s dashboard poll, 5 s remote activity
poll) are the data's, times the `time_scale` knob. The feed never ends unless the
`live_max_seconds` knob says so. What it reports comes from the state: an environment
list that changed, the dashboard snapshot of each environment as the REST operation
computes it, and the activity events the simulator publishes while operations run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .template import render


def _line(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def _allows_any(principal, perm: str) -> bool:
    if principal is None:
        return False
    return principal.sudo or perm in principal.global_perms or any(perm in p for p in principal.env_perms.values())


class LiveChannel:
    """One client's /stream: its producers, its queue, its heartbeat."""

    def __init__(self, app, principal, query: dict, decision):
        self.app = app
        self.principal = principal
        self.query = query
        self.decision = decision
        self.spec = app.behaviour.live
        self.queue: asyncio.Queue = asyncio.Queue()
        self.tasks: list[asyncio.Task] = []
        self.wakers: list[asyncio.Event] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def knobs(self):
        return self.app.sim.knobs.current

    def scaled(self, seconds: float) -> float:
        return self.knobs.scaled(seconds)

    def send(self, channel: str, payload_key: str, inner: dict) -> None:
        self.queue.put_nowait({"channel": channel, payload_key: inner, "timestamp": inner["timestamp"]})

    def channels(self) -> list[str]:
        wanted = []
        for name in (self.query.get("channels") or "").split(","):
            name = name.strip().lower()
            if name and name not in wanted:
                wanted.append(name)
        return wanted

    def limit(self) -> int:
        cfg = self.spec["channels"]["activities"]
        try:
            n = int(self.query.get("limit") or 0)
        except ValueError:
            n = 0
        return int(cfg["default_limit"]) if n <= 0 else min(n, int(cfg["max_limit"]))

    def remote_environments(self, perm: str) -> list[dict]:
        app = self.app
        local = str(app.behaviour.environments.get("local", "0"))
        out = []
        with app.store.lock:
            envs = list(app.store.items(app.behaviour.collections[app.behaviour.environments["collection"]], None))
        for env in envs:
            eid = str(env.get("id"))
            if eid != local and env.get("enabled", True) and self.principal.allows(perm, eid, app.behaviour.permissions.catalog):
                out.append(env)
        return out

    def waker(self) -> asyncio.Event:
        ev = asyncio.Event()
        self.wakers.append(ev)
        return ev

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        p = self.principal
        perm_dash = self.spec["channels"]["dashboard"]["permission"]
        perm_act = self.spec["channels"]["activities"]["permission"]
        local = str(self.app.behaviour.environments.get("local", "0"))
        catalog = self.app.behaviour.permissions.catalog
        for name in self.channels():
            if name == "environments":
                self.tasks.append(asyncio.ensure_future(self.environments()))
            elif name == "dashboard":
                if p is not None and p.allows(perm_dash, local, catalog):
                    self.tasks.append(asyncio.ensure_future(self.dashboard_local()))
                if _allows_any(p, perm_dash):
                    for env in self.remote_environments(perm_dash):
                        self.tasks.append(asyncio.ensure_future(self.dashboard_remote(env)))
            elif name == "activities":
                if p is not None and p.allows(perm_act, local, catalog):
                    self.tasks.append(asyncio.ensure_future(self.activities_local()))
                if _allows_any(p, perm_act):
                    for env in self.remote_environments(perm_act):
                        self.tasks.append(asyncio.ensure_future(self.activities_remote(env)))
            elif name == "version" and "version" in self.spec["channels"]:
                self.tasks.append(asyncio.ensure_future(self.version()))
            # unknown channel names are ignored

    def stop(self) -> None:
        for t in self.tasks:
            t.cancel()

    # ------------------------------------------------------------ producers

    async def sleep(self, seconds: float, waker: asyncio.Event | None = None) -> None:
        if waker is None:
            await asyncio.sleep(self.scaled(seconds))
            return
        try:
            await asyncio.wait_for(waker.wait(), self.scaled(seconds))
        except TimeoutError:
            pass
        waker.clear()

    async def environments(self) -> None:
        cfg = self.spec["channels"]["environments"]
        wake = self.waker()
        last, last_sent = None, 0.0
        while True:
            envs = self.app.visible_environments(self.principal)
            fingerprint = hashlib.sha256(json.dumps(envs, sort_keys=True, default=str).encode()).hexdigest()
            now = self.loop.time()
            if fingerprint != last or now - last_sent >= self.scaled(float(cfg["refresh_seconds"])):
                last, last_sent = fingerprint, now
                self.send("environments", "environment", {"type": "snapshot", "environments": envs, "timestamp": self.app.store.stamp()})
            await self.sleep(float(cfg["poll_seconds"]), wake)

    async def version(self) -> None:
        """The version channel: the running version at once, again when it changes."""
        cfg = self.spec["channels"]["version"]
        last = None
        while True:
            ctx = {"document": {"version": str((self.app.sim.served_document.get("info") or {}).get("version") or "")}}
            payload = render(cfg["payload"], ctx)
            if payload != last:
                last = payload
                self.send("version", "version", {**payload, "timestamp": self.app.store.stamp()})
            await self.sleep(float(cfg["poll_seconds"]))

    async def dashboard_local(self) -> None:
        cfg = self.spec["channels"]["dashboard"]
        local = str(self.app.behaviour.environments.get("local", "0"))
        cache: dict = {}
        last_error = ""
        while True:
            last_error = self.dashboard_poll(local, cache, last_error, float(cfg["cache_seconds"]))
            await self.sleep(float(cfg["poll_seconds"]))

    def dashboard_poll(self, env: str, cache: dict, last_error: str, cache_seconds: float) -> str:
        snapshot, error = self.app.dashboard_snapshot(env, cache, self.scaled(cache_seconds))
        if error is not None:
            if error != last_error:
                self.send("dashboard", "dashboard", {"type": "error", "environmentId": env, "error": error, "timestamp": self.app.store.stamp()})
            return error
        self.send("dashboard", "dashboard", {"type": "snapshot", "environmentId": env, "snapshot": snapshot, "timestamp": self.app.store.stamp()})
        return ""

    async def dashboard_remote(self, env: dict) -> None:
        cfg = self.spec["channels"]["dashboard"]
        eid = str(env.get("id"))
        self.send("dashboard", "dashboard", {"type": "pending", "environmentId": eid, "timestamp": self.app.store.stamp()})
        cache: dict = {}
        last_error = ""
        while True:
            last_error = self.dashboard_poll(eid, cache, last_error, float(cfg["cache_seconds"]))
            await self.sleep(float(cfg["poll_seconds"]))

    async def activities_local(self) -> None:
        local = str(self.app.behaviour.environments.get("local", "0"))
        events: asyncio.Queue = asyncio.Queue()
        loop = self.loop

        def listener(kind: str, env: str | None, payload: dict) -> None:
            if kind in ("activity", "message") and env == local:
                loop.call_soon_threadsafe(events.put_nowait, (kind, payload))

        unsubscribe = self.app.store.subscribe(listener)  # before the snapshot: nothing falls in between
        try:
            self.send("activities", "activity", {"type": "snapshot", "environmentId": local,
                                                 "activities": self.app.activities_snapshot(local, self.limit()), "timestamp": self.app.store.stamp()})
            while True:
                kind, payload = await events.get()
                self.send("activities", "activity", self.app.activity_event(kind, local, payload))
        finally:
            unsubscribe()

    async def activities_remote(self, env: dict) -> None:
        cfg = self.spec["channels"]["activities"]
        eid = str(env.get("id"))
        last, last_error = None, ""
        while True:
            snapshot, error = self.app.remote_activities(eid, self.limit())
            if error is not None:
                if error != last_error:
                    self.send("activities", "activity", {"type": "error", "environmentId": eid, "error": error, "timestamp": self.app.store.stamp()})
                last_error = error
            else:
                last_error = ""
                fingerprint = hashlib.sha256(json.dumps(snapshot, sort_keys=True, default=str).encode()).hexdigest()
                if fingerprint != last:
                    last = fingerprint
                    self.send("activities", "activity", {"type": "snapshot", "environmentId": eid, "activities": snapshot,
                                                         "timestamp": self.app.store.stamp()})
            await self.sleep(float(cfg["remote_poll_seconds"]))

    # ------------------------------------------------------------ the writer

    async def lines(self, abort: Callable[[], Awaitable[None]]) -> AsyncIterator[bytes]:
        """The JSON lines, heartbeats on a fixed ticker, until the client leaves (or the
        `live_max_seconds` knob, or a `drop` fault after N lines)."""
        self.start()
        loop = self.loop
        heartbeat = self.scaled(float(self.spec["heartbeat_seconds"]))
        next_beat = loop.time() + heartbeat
        bound = self.knobs.live_max_seconds
        deadline = loop.time() + bound if bound is not None else None
        sent = 0
        stall = self.decision.stall
        try:
            while True:
                now = loop.time()
                if deadline is not None and now >= deadline:
                    return
                wait = next_beat - now if deadline is None else min(next_beat, deadline) - now
                try:
                    item = await asyncio.wait_for(self.queue.get(), max(wait, 0))
                except TimeoutError:
                    if deadline is not None and loop.time() >= deadline:
                        return
                    item = render(self.spec["heartbeat"], {"stamp": self.app.store.stamp()})
                    next_beat += heartbeat
                if self.decision.drop and sent >= self.decision.drop_after:
                    await abort()
                    return
                yield _line(item)
                sent += 1
                if stall and sent == stall[1]:
                    await asyncio.sleep(stall[0])
        finally:
            self.stop()
