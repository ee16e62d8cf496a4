"""`interp`: the command line. Each command is a thin shell over one pipeline stage."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
from dataclasses import replace
from pathlib import Path

import click

from .. import CATALOG_DIR, RULES_DIR
from ..config import SETTINGS, Settings, load_settings, parse_bool
from ..errors import ConfigError, RuleError
from ..paths import checkout_for_writing

# Every import inside a command's body below is that command's own: the server, the builder from the
# sources, the simulator, the reference and the rules doc load only when their command runs, so that
# `interp --help` and each command pay for what they use (the server's start imports no builder).

SETTINGS_HELP = """Every setting is an environment variable and a flag; a flag wins. A yes/no
setting is a bare flag: --read-only turns it on and --no-read-only off, whatever
ARCANE_MCP_READ_ONLY (true/false, 1/0, yes/no, on/off) says; the same for --safe-mode,
--insecure-skip-verify, --output-schemas, --allow-anonymous, --behind-tls-proxy,
--http-stateful and --metrics."""


def _setting_flag(s) -> tuple[list[str], dict]:
    """The CLI flag of one setting of config.SETTINGS (same parser, same error line): its
    declarations and attributes. A yes/no setting is a click flag pair (--x/--no-x) whose
    default None leaves the variable in charge: env-var parity without demanding a value
    after the flag."""
    if s.parse is parse_bool:
        return [f"{s.flag}/--no-{s.flag[2:]}", s.attr], {"default": None, "help": f"{s.doc} [env {s.env}=true|false]"}
    return [s.flag, s.attr], {"default": None, "help": f"{s.doc} [env {s.env}]", "metavar": "VALUE"}


def setting_options(func):
    """One CLI flag per setting, after the command's own options: the decorator form of
    SettingsCommand, for a command made elsewhere."""
    for s in reversed(SETTINGS):
        decls, attrs = _setting_flag(s)
        func = click.option(*decls, **attrs)(func)
    return func


class SettingsCommand(click.Command):
    """A command taking every setting as a flag, after its own options. The ~60 flags are
    made when the command is first used (its parse, its help), not when this module is
    imported: a server start does not make the other commands' (~4 ms)."""

    @property
    def params(self) -> list[click.Parameter]:
        if self._with_settings is None:
            flags = [_setting_flag(s) for s in SETTINGS]
            self._with_settings = [*self._own_params, *(click.Option(decls, **attrs) for decls, attrs in flags)]
        return self._with_settings

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self._own_params = list(value)
        self._with_settings: list[click.Parameter] | None = None


def _fail(exc: ConfigError) -> None:
    """A configuration problem: one line with its code, exit 2."""
    click.echo(f"interp: {exc.format()}", err=True)
    sys.exit(2)


def _settings(flags: dict) -> Settings:
    try:
        return load_settings(flags={k: v for k, v in flags.items() if v is not None})
    except ConfigError as exc:
        _fail(exc)


def _runtime(settings: Settings):
    from ..front.serve import build_runtime

    try:
        runtime = build_runtime(settings)
    except RuleError as exc:
        click.echo("interp: the rules are invalid; the server does not start:", err=True)
        for p in exc.problems:
            click.echo(p.format(), err=True)
        sys.exit(1)
    except ConfigError as exc:
        _fail(exc)
    if runtime.dispatcher.audit.notice:
        click.echo(f"interp: {runtime.dispatcher.audit.notice}", err=True)
    return runtime


def _start(settings: Settings):
    """`_runtime` for a server: a start makes some hundred thousand objects that live as long
    as the process (the SDK's models, the catalog) and the collector would walk them again
    and again while they are made. It is paused meanwhile, and what the start made is then
    moved out of its sight (gc.freeze: the few hundred cycles a start leaves as garbage stay
    too, a one-time cost far smaller than the full collection that would find them)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _runtime(settings)
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def _logging(level: str) -> None:
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # httpx logs every request's URL at INFO, and a webhook trigger's URL holds its token
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLogger().level))


@click.group()
@click.version_option(package_name="arcane-mcp")
def main() -> None:
    """arcane-mcp: run Docker hosts through Arcane from any MCP client."""


@main.command(cls=SettingsCommand, epilog=SETTINGS_HELP)
@click.option("--http", "http_mode", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 instead of stdio")
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="HTTP port (overrides the port of --listen)")
def serve(http_mode: bool, port: int | None, **flags) -> None:
    """Serve MCP over stdio (default) or streamable HTTP (--http)."""
    settings = replace(_settings(flags), transport="http" if http_mode else "stdio")
    _logging(settings.log_level)
    sock = None
    if http_mode:
        from ..front.httpmode import check_posture
        from ..front.listen import bind

        host, lport = settings.listen
        try:
            check_posture(settings, host)
            # bind first: a busy port is one line, and nothing is announced before it is ours
            sock = bind(host, port if port is not None else lport, setting="--port" if port is not None else "ARCANE_MCP_LISTEN (--listen)")
        except ConfigError as exc:
            _fail(exc)
    runtime = _start(settings)
    if not settings.arcane_url:
        click.echo("interp: ARCANE_URL is not set; every call will answer that no Arcane is configured", err=True)
    if sock is not None:
        from ..front.httpmode import serve_http
        from ..front.listen import address_text

        where = address_text(*sock.getsockname()[:2])

        def announce() -> None:
            click.echo(f"arcane-mcp: MCP endpoint http://{where}/mcp (surface {settings.surface}, {len(runtime.catalog.actions)} actions)", err=True)

        serve_http(runtime, sock, on_ready=announce)
    else:
        from ..front.serve import serve_stdio

        try:
            asyncio.run(serve_stdio(runtime))
        except ConfigError as exc:
            _fail(exc)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=0, help="Port (0 = a free one)")
@click.option("--state", "state_path", type=click.Path(exists=True), default=None, help="State file or directory (default: the demo state)")
@click.option("--api-key", default=None, help="The bootstrap API key it accepts (default: from the state)")
@click.option("--document", "document", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Serve another OpenAPI document (another Arcane version; default: the embedded one)")
@click.option("--latency", type=float, default=None, help="Fault: seconds of latency on every answer")
@click.option("--error-5xx", "error_5xx", type=int, default=None, help="Fault: answer every request with this 5xx status")
@click.option("--daemon-down", "daemon_down", multiple=True, metavar="ENV_ID", help="Fault: this environment's Docker daemon is unreachable (repeatable)")
@click.option("--drop", is_flag=True, help="Fault: drop every connection without an answer")
@click.option("--malformed", is_flag=True, help="Fault: answer bodies that are not valid JSON")
@click.option("--time-scale", "time_scale", type=float, default=None,
              help="Knob: Arcane's intervals (heartbeats, polls, stats, sleep in a terminal) times this (default 1)")
@click.option("--live-max-seconds", "live_max_seconds", type=float, default=None,
              help="Knob: end the live channel (/api/stream) after this many seconds (default: never, as Arcane)")
@click.option("--exec-close", "exec_close", type=click.Choice(["2.12", "2.8"]), default=None,
              help="Knob: how a terminal ends when its shell exits: 2.12 (close 1000 \"shell exited\") or 2.8 (no close frame)")
@click.option("--log-follow-seconds", "log_follow_seconds", type=float, default=None,
              help="Knob: a followed, running container writes a line this often (default: only appended lines)")
@click.option("--stream-line-seconds", "stream_line_seconds", type=float, default=None,
              help="Knob: seconds between an operation stream's lines (pull, deploy…), so it can be cancelled or watched")
@click.option("--stream-framing", "stream_framing", type=click.Choice(["ndjson", "sse"]), default=None,
              help="Knob: operation streams as JSON lines (ndjson, default) or server-sent events (sse, as Arcane 2.15)")
@click.option("--live-framing", "live_framing", type=click.Choice(["ndjson", "sse"]), default=None,
              help="Knob: the live channel (/api/stream) as JSON lines (ndjson, default) or server-sent events (sse)")
def simulate(host: str, port: int, state_path: str | None, api_key: str | None, document: str | None, latency, error_5xx,
             daemon_down, drop, malformed, time_scale, live_max_seconds, exec_close, log_follow_seconds, stream_line_seconds,
             stream_framing, live_framing) -> None:
    """Run the Arcane simulator (HTTP and WebSockets on 127.0.0.1) with demo data or a state file."""
    # the simulator is its own top-level package (simulator/README.md), imported only here
    from simulator import FaultError, KnobError
    from simulator import main as sim_main
    from simulator.errors import BindError, DataError

    faults = {}
    if latency is not None:
        faults["latency"] = latency
    if error_5xx is not None:
        faults["error_5xx"] = error_5xx
    if daemon_down:
        faults["daemon_down"] = list(daemon_down)
    if drop:
        faults["drop"] = True
    if malformed:
        faults["malformed"] = True
    knobs = {name: value for name, value in (("time_scale", time_scale), ("live_max_seconds", live_max_seconds), ("exec_close", exec_close),
                                             ("log_follow_seconds", log_follow_seconds), ("stream_line_seconds", stream_line_seconds),
                                             ("stream_framing", stream_framing), ("live_framing", live_framing))
             if value is not None}
    try:
        sim_main(host=host, port=port, state_path=state_path, api_key=api_key, faults=faults or None, document=document, knobs=knobs or None)
    except BindError as exc:  # a busy port: the simulator binds before it prints its address
        click.echo(f"interp: {exc.format()}", err=True)
        sys.exit(2)
    except (KnobError, FaultError) as exc:  # a knob or fault value out of range: one line naming it
        click.echo(f"interp simulate: {exc}", err=True)
        sys.exit(2)
    except DataError as exc:  # the simulator's own data (or a given state or document) is invalid: say where
        for p in exc.problems:
            click.echo(p.format(), err=True)
        sys.exit(2)


@main.command()
@click.argument("rules_dir", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--catalog", "catalog_dir", type=click.Path(file_okay=False, path_type=Path), default=None, help="Catalog directory (default: the packaged one)")
@click.option("--json", "as_json", is_flag=True, help="Print the problems as JSON")
def validate(rules_dir: Path | None, catalog_dir: Path | None, as_json: bool) -> None:
    """Validate rule and inventory files; exit 1 on any problem.

    RULES_DIR is an operator's directory: it is laid over the packaged rules and the merged
    result is validated, each problem naming the layer its file belongs to (the packaged
    rules themselves when RULES_DIR is omitted or is the packaged directory)."""
    from ..build.catalog import problems as run

    problems = run(RULES_DIR, catalog_dir or CATALOG_DIR, operator_rules=rules_dir)
    if as_json:
        click.echo(json.dumps({"ok": not problems, "problems": [p.as_dict() for p in problems]}, indent=2))
    else:
        for p in problems:
            click.echo(p.format())
        if not problems:
            click.echo("ok: rules and catalog are valid", err=True)
    sys.exit(1 if problems else 0)


def _emit(report, as_json: bool) -> None:
    """A report's JSON (`as_dict()`) or its text lines (`lines()`) on stdout."""
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, ensure_ascii=False))
    else:
        for line in report.lines():
            click.echo(line)


@main.command()
@click.option("--rules", "rules_report", is_flag=True,
              help="Report what the overlays leave out, per domain (usage notes, columns, empty hints, next steps); never fails")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON")
def audit(rules_report: bool, as_json: bool) -> None:
    """Prove 1:1 coverage: every operation and route is an action or allowlisted; exit 1 otherwise.
    With --rules: the overlays' coverage per domain instead (a report; exit 0)."""
    if rules_report:
        from .audit import rules_coverage

        coverage = rules_coverage()
        _emit(coverage, as_json)
        # a report, not a gate: only rules that cannot be read make it fail
        sys.exit(1 if coverage.unreadable else 0)
    from .audit import audit as run

    report = run()
    _emit(report, as_json)
    sys.exit(0 if report.ok else 1)


ROOT_OPTION = click.option("--root", "root", type=click.Path(file_okay=False, path_type=Path), default=None,
                           help="The arcane-mcp checkout to work on (default: the one at or above the working directory)")


def _checkout(command: str, root: Path | None) -> Path:
    """The checkout a writing command works on; one line and exit 2 when there is none
    (an installed package is never written to)."""
    try:
        return checkout_for_writing(command, root)
    except ConfigError as exc:
        _fail(exc)


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 if docs/reference differs from the catalog")
@ROOT_OPTION
def reference(check: bool, root: Path | None) -> None:
    """Generate the tool reference under docs/reference of a checkout (or --check it)."""
    from .reference import check as run_check
    from .reference import write

    _generate("reference", "docs/reference", root, check, run_check, write)


def _generate(command: str, target: str, root: Path | None, check: bool, run_check, write) -> None:
    """A generated doc of a checkout: write it, or with --check list what differs (exit 1)."""
    root = _checkout(command, root)
    try:
        if check:
            diffs = run_check(root)
            for d in diffs:
                click.echo(f"out of date: {d}")
            if diffs:
                click.echo(f"run `interp {command}` (make reference) to regenerate", err=True)
            sys.exit(1 if diffs else 0)
        changed = write(root)
    except ConfigError as exc:
        _fail(exc)
    click.echo(f"{target}: {len(changed)} file(s) written", err=True)


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 if server.json or server-card.json differs from the catalog")
@ROOT_OPTION
def manifest(check: bool, root: Path | None) -> None:
    """Generate server.json (MCP Registry) and server-card.json (SEP-2127) of a checkout (or --check them)."""
    from . import manifest as m

    root = _checkout("manifest", root)
    if check:
        diffs = m.check(root)
        for d in diffs:
            click.echo(f"out of date: {d}")
        if diffs:
            click.echo("run `interp manifest` to regenerate", err=True)
        sys.exit(1 if diffs else 0)
    changed = m.write(root)
    click.echo(f"{len(changed)} file(s) written", err=True)


@main.command("compile")
@click.option("--check", is_flag=True, help="Exit 1 if compiled/catalog.json differs from a fresh compile of catalog/ and rules/")
@ROOT_OPTION
def compile_(check: bool, root: Path | None) -> None:
    """Compile catalog/ and rules/ of a checkout into compiled/catalog.json, the artefact a start reads (or --check it)."""
    from . import compiled

    def guarded(run):
        def call(r: Path) -> list[str]:
            try:
                return run(r)
            except RuleError as exc:
                click.echo("interp: the rules are invalid; nothing is compiled:", err=True)
                for p in exc.problems:
                    click.echo(p.format(), err=True)
                sys.exit(1)
        return call

    _generate("compile", "compiled/catalog.json", root, check, guarded(compiled.check), guarded(compiled.write))


@main.command("rules-doc")
@click.option("--check", is_flag=True, help="Exit 1 if docs/rules.md differs from the schemas and its template")
@ROOT_OPTION
def rules_doc(check: bool, root: Path | None) -> None:
    """Generate docs/rules.md of a checkout from the rule and inventory schemas (or --check it)."""
    from .rulesdoc import check as run_check
    from .rulesdoc import write

    _generate("rules-doc", "docs/rules.md", root, check, run_check, write)


@main.command("update-spec")
@click.argument("source")
@ROOT_OPTION
def update_spec(source: str, root: Path | None) -> None:
    """Replace a checkout's embedded OpenAPI document from a FILE or a live Arcane URL, then validate."""
    from .update_spec import update_spec as run

    root = _checkout("update-spec", root)
    report = run(source, root / "catalog", root / "rules")
    for line in report.lines():
        click.echo(line)
    sys.exit(0 if report.ok else 1)


def _parse_kv(pairs: tuple[str, ...], action) -> dict:
    """`key=value` pairs; a value is JSON when it parses as JSON and the schema does not want a string."""
    props = action.input_schema.get("properties", {}) if action else {}
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="PARAMS")
        key, value = pair.split("=", 1)
        want = props.get(key, {}).get("type")
        if want == "string" or (isinstance(want, list) and "string" in want and len(want) <= 2):
            out[key] = value
            continue
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


@main.command(cls=SettingsCommand, epilog=SETTINGS_HELP)
@click.argument("action_id")
@click.argument("params", nargs=-1)
@click.option("--confirm", is_flag=True, help="Confirm a destructive action")
@click.option("--json", "as_json", is_flag=True, help="Print the whole tool result as JSON")
def call(action_id: str, params: tuple[str, ...], confirm: bool, as_json: bool, **flags) -> None:
    """Run one action through the dispatcher and print what a model would see."""
    settings = _settings(flags)
    _logging(settings.log_level)
    runtime = _runtime(settings)
    from ..call.dispatch import Call
    from ..front.wire import result_wire

    args = _parse_kv(params, runtime.catalog.actions.get(action_id))

    async def progress(value: float, total: float | None, message: str) -> None:
        # the progress notifications a client would get, on stderr so stdout stays the result
        click.echo(f"progress {value:g}{f'/{total:g}' if total else ''}: {message}", err=True)

    async def run():
        try:
            if runtime.dispatcher.client is not None:
                await runtime.dispatcher.client.start()
            return await runtime.dispatcher.dispatch(Call(action_id, args, confirm, "dynamic", "interp call", progress))
        finally:
            if runtime.dispatcher.client is not None:
                await runtime.dispatcher.client.aclose()

    try:
        result = asyncio.run(run())
    except ConfigError as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(result_wire(result), indent=2, ensure_ascii=False))
    else:
        click.echo(result.text)
        for blob in result.blobs:
            click.echo(f"[attached: {blob.filename}, {len(blob.data)} bytes, {blob.mime_type}]")
    sys.exit(1 if result.is_error else 0)


def _catalog(settings: Settings):
    """The catalog these settings serve (read-only, exclusions, operator rules), without a
    client: for commands that only read it."""
    from ..build.catalog import BuildOptions, build

    try:
        return build(BuildOptions(environment_default=settings.environment_id, read_only=settings.read_only,
                                  exclude=settings.exclude_tools, operator_rules=settings.rules_dir))
    except RuleError as exc:
        click.echo("interp: the rules are invalid:", err=True)
        for p in exc.problems:
            click.echo(p.format(), err=True)
        sys.exit(1)


@main.command(cls=SettingsCommand, epilog=SETTINGS_HELP)
@click.argument("action_id")
@click.option("--json", "as_json", is_flag=True, help="Print the decisions as JSON")
def explain(action_id: str, as_json: bool, **flags) -> None:
    """Show every choice the engine made for one action and the file:line it comes from."""
    from .explain import Explained
    from .explain import explain as run

    settings = _settings(flags)
    catalog = _catalog(settings)
    try:
        decisions = run(catalog, action_id, settings.surface)
    except ConfigError as exc:
        _fail(exc)
    _emit(Explained(action_id, decisions), as_json)


@main.command(cls=SettingsCommand, epilog=SETTINGS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON")
def doctor(as_json: bool, **flags) -> None:
    """Check the configured Arcane: reachable, TLS, credential and permissions, version, the
    live OpenAPI document vs the embedded one, the default environment and its Docker daemon.
    Exit 0 when all are ok, 1 on a warning, 2 on a failure."""
    from .doctor import diagnose

    settings = _settings(flags)
    _logging(settings.log_level)
    catalog = _catalog(settings)
    report = asyncio.run(diagnose(settings, catalog))
    _emit(report, as_json)
    sys.exit(report.exit_code)


@main.command()
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", type=int, default=5, show_default=True)
def find(query: tuple[str, ...], limit: int) -> None:
    """Rank actions for a free-text query, as arcane_find_action does."""
    from ..build.catalog import build
    from ..front.surfaces import find_line
    from ..text.rank import Ranker

    try:
        catalog = build()
    except RuleError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)
    for hit in Ranker(catalog).rank(" ".join(query), limit):
        click.echo(f"{hit.score:7.2f}  {find_line(hit.action, catalog, getattr(hit, 'confidence', None))}")


if __name__ == "__main__":
    main()
