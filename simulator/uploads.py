"""Chunked upload sessions (behaviour kind `upload:` and section `uploads:`, uploads.yaml):
create a session, PUT its chunks as raw bytes, inspect or abort it, and consume the
assembled bytes once by `uploadId` from the image, volume-backup or build-workspace
endpoint — byte for byte, as Arcane's internal/upload/upload.go stages them on disk.

A session lives per environment (for a remote environment, on its agent) in the store;
a consumed session's bytes stay readable as a blob where the consumer put them (a
volume backup's download, a build workspace file) and its digest is recorded
(`Simulator.uploads()`).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from collections.abc import Callable
from typing import Any

from .template import render

UPLOAD_ID = re.compile(r"^[0-9a-f]{16}$")


class UploadRefused(Exception):
    """An upload-session error: the status and the detail Arcane answers."""

    def __init__(self, status: int, detail: str):
        self.status = status
        self.detail = detail


def _text(spec: dict, name: str, **values: Any) -> str:
    return str(render(spec["texts"][name], values))


def public(session: dict) -> dict:
    """The Session as Arcane answers it."""
    received = sorted(session["chunks"])
    return {"createdAt": session["createdAt"], "id": session["id"], "kind": session["kind"], "filename": session["filename"],
            "receivedChunks": received, "size": session["size"], "chunkSize": session["chunkSize"],
            "totalChunks": session["totalChunks"], "complete": len(received) == session["totalChunks"]}


def _load(app, ex, kind: str, upload_id: str) -> dict:
    spec = app.behaviour.uploads
    if not UPLOAD_ID.match(upload_id or ""):
        raise UploadRefused(404, _text(spec, "invalid_id"))
    with app.store.lock:
        session = app.store.uploads.get((ex.env, upload_id))
    if session is None:
        raise UploadRefused(404, _text(spec, "not_found", id=upload_id))
    if session["kind"] != kind:
        raise UploadRefused(400, _text(spec, "kind_mismatch", kind=session["kind"]))
    return session


def create(app, ex, ctx: dict) -> dict:
    spec = app.behaviour.uploads
    kind = ex.params.get("kind", "")
    rules = spec["kinds"].get(kind) or {}
    body = ex.body or {}
    filename = posixpath.basename(str(body.get("filename") or "").replace("\\", "/"))
    if filename in ("", ".", "/"):
        raise UploadRefused(422, _text(spec, "no_filename"))
    suffixes = rules.get("suffixes")
    if suffixes and not any(filename.lower().endswith(s) for s in suffixes):
        raise UploadRefused(422, _text(spec, "bad_type", kind=kind))
    size = int(body.get("size") or 0)
    if size <= 0:
        raise UploadRefused(422, _text(spec, "bad_size"))
    if rules.get("max_mb"):
        max_mb = int(rules["max_mb"])
        if size > max_mb * 1024 * 1024:
            raise UploadRefused(422, _text(spec, "too_big", mb=max_mb))
    chunk = int(body.get("chunkSize") or 0) or int(spec["chunk"]["default"])
    low, high = int(spec["chunk"]["min"]), int(spec["chunk"]["max"])
    if chunk < low or chunk > high:
        raise UploadRefused(422, _text(spec, "bad_chunk_size", min=low, max=high))
    upload_id = app.store.fresh_ids()["hex64"][:16]
    session = {"id": upload_id, "kind": kind, "filename": filename, "size": size, "chunkSize": chunk,
               "totalChunks": (size + chunk - 1) // chunk, "chunks": {}, "createdAt": app.store.stamp()}
    with app.store.lock:
        app.store.uploads[(ex.env, upload_id)] = session
    return public(session)


def chunk(app, ex, ctx: dict) -> dict:
    spec = app.behaviour.uploads
    session = _load(app, ex, ex.params.get("kind", ""), ex.params.get("uploadId", ""))
    try:
        index = int(ex.params.get("index", ""))
    except ValueError:
        raise UploadRefused(422, _text(spec, "chunk_range", index=ex.params.get("index"), total=session["totalChunks"])) from None
    if index < 0 or index >= session["totalChunks"]:
        raise UploadRefused(422, _text(spec, "chunk_range", index=index, total=session["totalChunks"]))
    expected = session["chunkSize"] if index < session["totalChunks"] - 1 else session["size"] - index * session["chunkSize"]
    data = ex.raw_body
    if len(data) != expected:
        raise UploadRefused(422, _text(spec, "chunk_size", index=index, got=len(data), want=expected))
    with app.store.lock:
        session["chunks"][index] = bytes(data)  # a re-sent chunk overwrites: idempotent
    return public(session)


def get(app, ex, ctx: dict) -> dict:
    return public(_load(app, ex, ex.params.get("kind", ""), ex.params.get("uploadId", "")))


def delete(app, ex, ctx: dict) -> dict:
    session = _load(app, ex, ex.params.get("kind", ""), ex.params.get("uploadId", ""))
    with app.store.lock:
        app.store.uploads.pop((ex.env, session["id"]), None)
    return {}


def consume(app, ex, ctx: dict) -> dict:
    """The assembled bytes of a complete session, once (the session is gone after)."""
    spec = app.behaviour.uploads
    b = app.behaviour.operations[ex.op.operation_id]
    kind = b.get("upload")["kind"]
    upload_id = str((ex.body or {}).get("uploadId") or "")
    session = _load(app, ex, kind, upload_id)
    received = len(session["chunks"])
    if received != session["totalChunks"]:
        raise UploadRefused(409, _text(spec, "incomplete", received=received, total=session["totalChunks"]))
    with app.store.lock:
        app.store.uploads.pop((ex.env, upload_id), None)
    data = b"".join(session["chunks"][i] for i in range(session["totalChunks"]))
    digest = hashlib.sha256(data).hexdigest()
    upload = {**public(session), "sha256": digest, "bytes": len(data)}
    ctx["upload"] = upload
    blob = b.get("upload").get("blob")
    if blob:
        key = str(render(blob, ctx))
        with app.store.lock:
            app.store.blobs[(str(ex.env), key)] = data
        upload["blob"] = key
    app.sim.record_upload({"operation": ex.op.operation_id, "environment": ex.env, **upload})
    return upload


OPS: dict[str, Callable[[Any, Any, dict], dict]] = {"create": create, "chunk": chunk, "get": get, "delete": delete, "consume": consume}
