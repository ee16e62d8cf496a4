"""The Kubernetes example of docs/http.md (a Deployment and a Service) checked against what
it deploys: the Dockerfile's port, user and health path, the settings table's names, the
drain timeout, and the scale-out rule (the sealing secret shared from a Secret, no
server-wide Arcane key). The documents are read from the Markdown with markdown-it-py and
loaded with ruamel.yaml; no cluster is needed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from ruamel.yaml import YAML

from interpreter.config import SETTINGS, Settings
from tests.test_dockerfile import DOCKERFILE, HEALTH_PATH, final_stage, instructions

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "http.md"


def documents(text: str) -> dict[str, dict]:
    """The YAML fences of the Markdown, by `kind`."""
    out: dict[str, dict] = {}
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.type == "fence" and tok.info.strip() == "yaml":
            for doc in YAML(typ="safe").load_all(tok.content):
                if isinstance(doc, dict) and "kind" in doc:
                    out[doc["kind"]] = doc
    return out


def dockerfile_facts() -> dict:
    ins = final_stage(instructions(DOCKERFILE.read_text(encoding="utf-8")))
    expose = [int(a.split("/")[0]) for w, a in ins if w == "EXPOSE"]
    uid = [int(m.group(1)) for w, a in ins if w == "RUN" for m in [re.search(r"--uid (\d+)", a)] if m]
    return {"port": expose[0], "uid": uid[0]}


def problems(docs: dict[str, dict]) -> list[str]:
    """What would make the example deploy something other than the server the repository builds."""
    out: list[str] = []
    facts = dockerfile_facts()
    dep, svc = docs.get("Deployment"), docs.get("Service")
    if dep is None or svc is None:
        return ["the example needs a Deployment and a Service"]
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    [c] = pod["containers"]
    if spec.get("replicas", 1) < 2:
        out.append("replicas: scale-out needs at least two")
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    if facts["port"] not in ports.values():
        out.append(f"containerPort: the image listens on {facts['port']}")
    for probe in ("readinessProbe", "livenessProbe"):
        get = (c.get(probe) or {}).get("httpGet") or {}
        port = ports.get(get.get("port"), get.get("port"))
        if get.get("path") != HEALTH_PATH or port != facts["port"]:
            out.append(f"{probe}: GET {HEALTH_PATH} on {facts['port']}")
    ctx = {**(pod.get("securityContext") or {}), **(c.get("securityContext") or {})}
    if ctx.get("runAsUser") != facts["uid"] or not ctx.get("runAsNonRoot"):
        out.append(f"securityContext: non-root, the image's uid {facts['uid']}")
    if pod.get("terminationGracePeriodSeconds", 30) <= Settings().drain_timeout:
        out.append("terminationGracePeriodSeconds: longer than the drain timeout")
    known = {s.env for s in SETTINGS}
    env = {e["name"]: e for e in c.get("env", [])}
    out += [f"env {name}: not a setting" for name in env if name not in known]
    secret = env.get("ARCANE_MCP_STATE_SECRET", {})
    if "secretKeyRef" not in (secret.get("valueFrom") or {}):
        out.append("ARCANE_MCP_STATE_SECRET: shared by every replica, from a Secret")
    out += [f"env {name}: each client sends its own key" for name in ("ARCANE_API_KEY", "ARCANE_PASSWORD") if name in env]
    if "ARCANE_URL" not in env:
        out.append("env ARCANE_URL: the operator's Arcane")
    selector = svc["spec"].get("selector") or {}
    labels = spec["template"]["metadata"].get("labels") or {}
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        out.append("Service selector: the Deployment's pod labels")
    for p in svc["spec"]["ports"]:
        if ports.get(p["targetPort"], p["targetPort"]) != facts["port"]:
            out.append(f"Service targetPort: {facts['port']}")
    return out


def test_the_documented_example_deploys_this_server():
    docs = documents(DOC.read_text(encoding="utf-8"))
    assert set(docs) >= {"Deployment", "Service"}
    assert problems(docs) == []


def _break(docs: dict, how: str) -> dict:
    c = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    if how == "replicas":
        docs["Deployment"]["spec"]["replicas"] = 1
    elif how == "probe":
        c["readinessProbe"]["httpGet"]["path"] = "/healthz"
    elif how == "secret":
        c["env"] = [e for e in c["env"] if e["name"] != "ARCANE_MCP_STATE_SECRET"] + [
            {"name": "ARCANE_MCP_STATE_SECRET", "value": "literal"}]
    elif how == "unknown_env":
        c["env"].append({"name": "ARCANE_MCP_NO_SUCH", "value": "1"})
    elif how == "grace":
        docs["Deployment"]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 10
    elif how == "port":
        docs["Service"]["spec"]["ports"][0]["targetPort"] = 9999
    elif how == "root":
        docs["Deployment"]["spec"]["template"]["spec"]["securityContext"]["runAsUser"] = 0
    return docs


@pytest.mark.parametrize("how", ["replicas", "probe", "secret", "unknown_env", "grace", "port", "root"])
def test_each_check_can_fail(how):
    docs = _break(documents(DOC.read_text(encoding="utf-8")), how)
    assert problems(docs)
