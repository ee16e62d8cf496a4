"""Arcane's plain-HTTP Echo routes beside the OpenAPI document (behaviour data in
live.yaml): pprof (global admins only), the public webhook trigger and the public RFC 8693
token exchange. One small function per route in ROUTES, matched before the catch-all.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import hmac
import json
import urllib.parse
from collections.abc import Awaitable, Callable
from fnmatch import fnmatchcase
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .template import render


def _plain(status: int, body: Any, headers: dict | None = None) -> Response:
    return Response(json.dumps(body, ensure_ascii=False).encode("utf-8"), status_code=status, media_type="application/json", headers=headers)


def _answer(spec: dict, ctx: dict | None = None) -> Response:
    return _plain(int(spec["status"]), render(spec["body"], ctx or {}))


def _profile_bytes(name: str, seed: str) -> bytes:
    """A gzip stream standing in for a pprof protobuf profile (deterministic)."""
    raw = b"".join(hashlib.sha256(f"pprof:{name}:{seed}:{i}".encode()).digest() for i in range(16))
    return gzip.compress(b"\x0a\x04" + name.encode()[:4].ljust(4, b"_") + raw, mtime=0)


# ---------------------------------------------------------------- pprof


async def pprof(app, request: Request, rest: str) -> Response:
    spec = app.behaviour.pprof
    principal = app.echo_principal(request)
    if not hasattr(principal, "allows"):
        status, body = principal
        return _plain(status, body)
    if not principal.is_admin(app.behaviour.permissions.catalog):
        admin = app.behaviour.echo["auth"]["admin_required"]
        return _plain(int(admin["status"]), admin["body"])
    nosniff = {"X-Content-Type-Options": "nosniff"}
    name = rest.strip("/")
    knobs = app.sim.knobs.current
    if request.method == "POST" and name != "symbol":
        return None  # Echo registers GET only (POST for symbol)
    if name == "":
        return Response(spec["index"], media_type="text/html; charset=utf-8")
    if name == "cmdline":
        return Response(spec["cmdline"], media_type="text/plain; charset=utf-8", headers=nosniff)
    if name == "symbol":
        body = (await request.body()).decode("latin-1") if request.method == "POST" else request.query_params.get("", "")
        out = "num_symbols: 1\n"
        for word in [w for w in body.replace("+", " ").split() if w.startswith("0x")]:
            try:
                pc = int(word, 16)
            except ValueError:
                continue
            out += f"{hex(pc)} runtime.{['goexit', 'main', 'mcall', 'park_m'][pc % 4]}\n"
        return Response(out, media_type="text/plain; charset=utf-8", headers=nosniff)
    if name in ("profile", "trace"):
        cfg = spec["cpu"] if name == "profile" else spec["trace"]
        raw = request.query_params.get("seconds", "")
        try:
            seconds = float(raw) if name == "trace" else int(raw)
        except ValueError:
            seconds = 0
        if seconds <= 0:
            seconds = float(cfg["default_seconds"])
        await asyncio.sleep(knobs.scaled(seconds))  # the profile records for `seconds`
        return Response(_profile_bytes(name, str(seconds)), media_type="application/octet-stream",
                        headers={**nosniff, "Content-Disposition": f'attachment; filename="{cfg["filename"]}"'})
    if name not in spec["profiles"]:
        return Response(spec["unknown"]["text"], status_code=int(spec["unknown"]["status"]), media_type="text/plain; charset=utf-8",
                        headers={**nosniff, "X-Go-Pprof": "1"})
    try:
        debug = int(request.query_params.get("debug", "0") or 0)
    except ValueError:
        debug = 0
    if debug > 0:
        text = f"{name} profile: total 42\n" + "".join(f"1 @ 0x{4096 + i * 64:x} 0x{8192 + i:x}\n#\t0x{4096 + i * 64:x}\truntime.goexit+0x1\n"
                                                      for i in range(3))
        return Response(text, media_type="text/plain; charset=utf-8", headers=nosniff)
    return Response(_profile_bytes(name, "0"), media_type="application/octet-stream",
                    headers={**nosniff, "Content-Disposition": f'attachment; filename="{name}"'})


# ---------------------------------------------------------------- the webhook trigger


async def webhook_trigger(app, request: Request, rest: str) -> Response:
    spec = app.behaviour.webhook_trigger
    if request.method != "POST":
        return None
    if not rest.strip("/"):
        return None  # /webhooks/trigger/:token needs a token segment
    token = urllib.parse.unquote(rest.strip("/"))
    hex_part = token.strip()[len(spec["prefix"]):] if token.strip().startswith(spec["prefix"]) else None
    if hex_part is None or len(hex_part) < int(spec["prefix_len"]) or "/" in token:
        return _answer(spec["invalid"])
    found = app.find_webhook(token.strip())
    if found is None:
        return _answer(spec["not_found"])
    env, hook = found
    if not hook.get("enabled", True):
        return _answer(spec["disabled"])
    target_type = str(hook.get("targetType") or "")
    action = str(hook.get("actionType") or "").strip().lower() or spec["defaults"].get(target_type, "")
    action = (spec["aliases"].get(target_type) or {}).get(action, action)
    route = (spec["actions"].get(target_type) or {}).get(action)
    if route is None:
        return _plain(500, {"success": False, "error": "internal server error"})
    with app.store.lock:
        hook["lastTriggeredAt"] = app.store.stamp()
    method, suffix = route.split(" ", 1)
    ref = str(hook.get("targetName") or hook.get("targetId") or "") if target_type == "container" else str(hook.get("targetId") or "")
    path = "/api/environments/" + urllib.parse.quote(str(hook.get("environmentId") or env), safe="") + suffix.format(
        ref=urllib.parse.quote(ref, safe=""), target=urllib.parse.quote(str(hook.get("targetId") or ""), safe=""))
    asyncio.ensure_future(app.run_webhook_action(env, hook, target_type, action, method, path))
    return _answer(spec["accepted"])


# ---------------------------------------------------------------- RFC 8693 token exchange


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint_jwt(claims: dict, key: str) -> str:
    """An HS256 JWT (the simulator's stand-in for a workload identity token)."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(key.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(sig)}"


def jwt_claims(token: str) -> dict | None:
    """The claims of a JWT, unverified (Arcane's jwtclaims.ParseJWTClaims)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(_unb64url(parts[1]))
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def jwt_signed_with(token: str, key: str) -> bool:
    header, payload, sig = token.split(".")
    want = hmac.new(key.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    try:
        return hmac.compare_digest(want, _unb64url(sig))
    except ValueError:
        return False


def claim_at(claims: dict, path: str) -> Any:
    """A claim by its dotted path (Arcane's subjectClaim may name a nested one), or None."""
    node: Any = claims
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def subject_glob_match(pattern: str, value: str) -> bool:
    """Arcane's anchored glob: * any run, ? one character, everything else literal."""
    return fnmatchcase(value, pattern.replace("[", "[[]"))


async def token_exchange(app, request: Request, rest: str) -> Response:
    spec = app.behaviour.token_exchange
    if request.method != "POST" or rest.strip("/"):
        return None
    errors = spec["errors"]
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    form: dict[str, str] = {}
    if ctype == "application/x-www-form-urlencoded":
        for k, v in urllib.parse.parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True):
            form.setdefault(k, v)
    # federated/handler.go:84 reads c.Request().Form after ParseForm, which holds the URL's
    # query too, body values first (Go's net/http Request.ParseForm): form.Get finds either
    for k, v in request.query_params.multi_items():
        form.setdefault(k, v)
    subject = form.get("subject_token", "")
    if (form.get("grant_type") != spec["grant_type"] or not subject.strip() or form.get("subject_token_type") not in spec["subject_token_types"]
            or form.get("requested_token_type", "") not in ("", spec["requested_token_type"])):
        return _answer(errors["invalid_request"])
    claims = jwt_claims(subject)
    issuer = str((claims or {}).get("iss") or "")
    if not issuer:
        return _answer(errors["invalid_grant"])
    result = app.federated_exchange(subject, claims, issuer)
    if result is None:
        return _answer(errors["invalid_grant"])
    token, ttl = result
    return _plain(200, {"access_token": token, "token_type": "Bearer", "expires_in": ttl, "issued_token_type": spec["issued_token_type"]})


ROUTES: list[tuple[str, Callable[..., Awaitable[Response | None]]]] = [
    ("/api/debug/pprof", pprof),
    ("/api/webhooks/trigger", webhook_trigger),
    ("/api/auth/federated/token", token_exchange),
]


async def route(app, request: Request) -> Response | None:
    """The Echo route this request is for, answered; None when none is."""
    path = request.url.path
    for prefix, handler in ROUTES:
        if path == prefix or path.startswith(prefix + "/"):
            return await handler(app, request, path[len(prefix):])
    return None
