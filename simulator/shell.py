"""The simulated shell behind Arcane's terminal WebSocket: a TTY and a small POSIX shell.

Arcane runs `docker exec` with a TTY and pipes raw bytes both ways (api/ws/exec.go). What
a client sees is therefore what a terminal shows: every typed byte echoed by the TTY's
line discipline as it arrives, `\\r\\n` line ends, the shell's prompt (with the escape
sequences a real shell writes), the command's output — and no exit status, unless the
client asks the shell for `$?` itself. This module plays both parts, deterministically
and from the container's state, so a client's in-band end marker (`cmd; echo M$?`)
behaves as it would against a real container.

The TTY (canonical mode, ECHO, ICRNL, ONLCR, ECHOCTL): bytes are echoed as they arrive;
`\\r` or `\\n` ends a line (echoed `\\r\\n`); DEL/BS erase one character (`\\b \\b`), ^U
the line; ^C echoes `^C`, drops the line and interrupts the running command (status
130); ^D on an empty line is end of input (the shell exits). Output `\\n` becomes `\\r\\n`.
Typed-ahead lines wait while a command runs.

The shell: `;`, `&&`, `||`, `|` (between the filters below), `( list )` subshells (their
`exit`, `cd` and variables end with them: POSIX 2.9.4 "Grouping Commands"; a pipe or a
redirection after one is not simulated), `$(list)` command substitution (its output, its
trailing newlines removed, no field splitting), `#` comments, single and double quotes,
backslash escapes, `$?`, `$$`, `$NAME`, `${NAME}`, `~`, `NAME=value`,
redirections `> f`, `>> f`, `2>&1`, `2> f`, `&> f`, `< f` (files live in the session).
Commands: `echo`, `printf`, `cat`, `head`, `tail` (`-f` runs until ^C), `wc -l`, `grep`,
`ls`, `cd`, `pwd`, `env`, `printenv`, `export`, `unset`, `id`, `whoami`, `hostname`,
`uname`, `date`, `sleep` (its seconds × the time scale), `true`, `false`, `:`, `test`/`[`,
`exit`, `eval`, `sh -c`/`bash -c`. Anything else is "not found" (127) in the flavour's words.
What a flavour writes (prompt, not-found text, what `exit` prints) comes from the
behaviour data's `terminal.flavours` (dash, bash, ash).
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import posixpath
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

ETX, EOT, BS, DEL, NAK = 0x03, 0x04, 0x08, 0x7F, 0x15
INTERRUPTED = 130
MAX_NESTING = 64  # subshells and command substitutions inside each other (deeper: not simulated)


class ShellExit(Exception):
    def __init__(self, status: int):
        self.status = status


class Interrupted(Exception):
    """^C reached a running command."""


@dataclass
class Identity:
    user: str = "root"
    uid: int = 0
    gid: int = 0
    hostname: str = "localhost"
    home: str = "/root"


@dataclass
class Flavour:
    """What one shell implementation writes (from the behaviour data)."""

    name: str
    prompt: str  # template: {user} {hostname} {cwd} {sign} {esc}
    after_enter: str = ""  # written when a line is read (bash's bracketed-paste off)
    not_found: str = "{argv0}: {line}: {cmd}: not found"
    exit_text: str = ""  # written when the shell exits (bash's "exit")
    echo_escapes: bool = False  # echo interprets backslash escapes without -e (dash)
    ls_missing: str = "ls: cannot access '{path}': No such file or directory"
    ls_missing_status: int = 2
    argv0: str = "sh"

    @classmethod
    def from_data(cls, name: str, spec: dict) -> Flavour:
        keys = {f for f in cls.__dataclass_fields__ if f != "name"}
        return cls(name=name, **{k: v for k, v in spec.items() if k in keys})


@dataclass
class Machine:
    """The container as the shell sees it: environment, files, who and where it runs."""

    env: dict[str, str]
    files: dict[str, str]  # absolute path -> content
    dirs: set[str]
    identity: Identity
    cwd: str = "/"
    os_name: str = "Linux"
    machine: str = "x86_64"
    kernel: str = "6.1.0-41-amd64"
    now: Callable[[], int] = lambda: 0


# ---------------------------------------------------------------- words


@dataclass
class Word:
    parts: list[tuple[str, str]]  # (text, "'" single-quoted | '"' double-quoted | "" bare)

    def raw(self) -> str:
        return "".join(t for t, _ in self.parts)


@dataclass
class Op:
    op: str


_OPS = ("&&", "||", ">>", "2>&1", "&>", "2>", ";", "|", ">", "<", "&", "(", ")")


def _substitution_end(line: str, i: int) -> int:
    """The index after the `)` that closes the command substitution `$(` at `i` (the line's
    end when none does); quotes inside it are skipped whole."""
    depth, j, n = 0, i + 1, len(line)
    while j < n:
        c = line[j]
        if c in "'\"":
            k = line.find(c, j + 1)
            j = n if k < 0 else k + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


def tokenize(line: str) -> list[Word | Op]:
    """Words and operators of one command line (quotes kept for expansion); a quote left
    open is closed at the end of the line."""
    out: list[Word | Op] = []
    i, n = 0, len(line)
    cur: list[tuple[str, str]] | None = None

    def flush() -> None:
        nonlocal cur
        if cur is not None:
            out.append(Word(cur))
            cur = None

    while i < n:
        c = line[i]
        if c in " \t":
            flush()
            i += 1
            continue
        if c == "#" and cur is None:
            break
        if line.startswith("$(", i):
            # a command substitution stays one bare part of its word (run when the word is
            # expanded: Shell.substitute), never a subshell
            j = _substitution_end(line, i)
            cur = [] if cur is None else cur
            cur.append((line[i:j], ""))
            i = j
            continue
        op = next((o for o in _OPS if line.startswith(o, i)), None)
        if op is not None and (op != "2>" and op != "2>&1" or cur is None):
            flush()
            out.append(Op(op))
            i += len(op)
            continue
        if cur is None:
            cur = []
        if c == "'":
            j = line.find("'", i + 1)
            j = n if j < 0 else j
            cur.append((line[i + 1 : j], "'"))
            i = j + 1
        elif c == '"':
            buf, i = [], i + 1
            while i < n and line[i] != '"':
                if line.startswith("$(", i):  # its own quotes are its own
                    j = _substitution_end(line, i)
                    buf.append(line[i:j])
                    i = j
                    continue
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '$"\\`\n':
                    buf.append("\\" + line[i + 1])
                    i += 2
                    continue
                buf.append(line[i])
                i += 1
            cur.append(("".join(buf), '"'))
            i += 1
        elif c == "\\" and i + 1 < n:
            cur.append((line[i + 1], "'"))
            i += 2
        else:
            j = i
            while j < n and line[j] not in " \t'\"\\" and not line.startswith("$(", j) and not any(line.startswith(o, j) for o in _OPS):
                j += 1
            cur.append((line[i:j], ""))
            i = j
    flush()
    return out


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([?$#0-9]))")


def expand(word: Word, lookup: Callable[[str], str]) -> str:
    """Parameter expansion of one word (no field splitting: the words stay as typed)."""
    out = []
    for i, (text, quote) in enumerate(word.parts):
        if quote == "'":
            out.append(text)
            continue
        if quote == "" and i == 0 and (text == "~" or text.startswith("~/")):
            text = lookup("HOME") + text[1:]
        text = _VAR.sub(lambda m: lookup(m.group(1) or m.group(2) or m.group(3)), text)
        if quote == '"':
            text = re.sub(r"\\([$\"\\`])", r"\1", text)
        out.append(text)
    return "".join(out)


def _closing(tokens: list[Word | Op], start: int) -> int | None:
    """The index of the `)` that closes the `(` at `start`; None when none does."""
    depth = 0
    for i in range(start, len(tokens)):
        tok = tokens[i]
        if isinstance(tok, Op) and tok.op == "(":
            depth += 1
        elif isinstance(tok, Op) and tok.op == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


# ---------------------------------------------------------------- the shell


@dataclass
class Command:
    argv: list[str]
    assigns: list[tuple[str, str]] = field(default_factory=list)
    stdout: tuple[str, str] | None = None  # (mode ">" | ">>", path)
    stderr: str | None = None  # "stdout" (2>&1) | a path | None (the terminal)
    stdin: str | None = None


class Shell:
    """A POSIX-ish shell over a TTY; `run` drives it until the shell exits."""

    def __init__(self, flavour: Flavour, machine: Machine, write: Callable[[bytes], Awaitable[None]],
                 sleep: Callable[[float], Awaitable[None]], time_scale: float = 1.0):
        self.flavour = flavour
        self.m = machine
        self._write = self._tty = write
        self._sleep = sleep
        self.time_scale = time_scale
        self.status = 0
        self.line_no = 0
        self.vars: dict[str, str] = dict(machine.env)
        self.vars.setdefault("HOME", machine.identity.home)
        self.vars.setdefault("PWD", machine.cwd)
        self.exports: set[str] = set(machine.env) | {"HOME", "PWD"}
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.interrupt = asyncio.Event()
        self.running = False
        self._line = bytearray()
        self._pending = b""
        self.nesting = 0  # subshells and command substitutions open
        self.substituted: int | None = None  # the status of the last command substitution of a command

    # ------------------------------------------------------------ the TTY side

    async def out(self, text: str) -> None:
        """Output through the TTY (ONLCR: \\n -> \\r\\n)."""
        if text:
            await self._write(text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8", "replace"))

    async def err(self, text: str) -> None:
        """Error output: to the terminal even while a command substitution captures the
        output (stderr is not substituted)."""
        if text:
            await self._tty(text.replace("\r\n", "\n").replace("\n", "\r\n").encode("utf-8", "replace"))

    async def feed(self, data: bytes) -> None:
        """Bytes typed by the client: echoed and edited as a canonical-mode TTY does."""
        data = self._pending + data
        self._pending = b""
        echo = bytearray()
        i = 0
        while i < len(data):
            b = data[i]
            if b in (0x0D, 0x0A):
                echo += b"\r\n"
                line = self._line.decode("utf-8", "replace")
                self._line.clear()
                self.lines.put_nowait(line)
                if b == 0x0D and i + 1 < len(data) and data[i + 1] == 0x0A:
                    i += 1  # \r\n typed as one line end
            elif b == ETX:
                echo += b"^C"
                self._line.clear()
                self.interrupt.set()
                if not self.running:
                    self.lines.put_nowait("\x03")  # the shell abandons the line: a fresh prompt
            elif b == EOT:
                if not self._line:
                    self.lines.put_nowait(None)
            elif b in (DEL, BS):
                if self._line:
                    # drop one whole UTF-8 character
                    while self._line and (self._line[-1] & 0xC0) == 0x80:
                        self._line.pop()
                    if self._line:
                        self._line.pop()
                    echo += b"\b \b"
            elif b == NAK:
                echo += b"\b \b" * len(self._line.decode("utf-8", "replace"))
                self._line.clear()
            elif b < 0x20 and b != 0x09:
                echo += b"^" + bytes([b + 0x40])  # ECHOCTL
            else:
                self._line.append(b)
                echo.append(b)
            i += 1
        if echo:
            await self._write(bytes(echo))

    # ------------------------------------------------------------ the shell side

    def prompt(self) -> str:
        ident = self.m.identity
        cwd = self.m.cwd
        if ident.home != "/" and (cwd == ident.home or cwd.startswith(ident.home + "/")):
            cwd = "~" + cwd[len(ident.home):]
        return self.flavour.prompt.format(user=ident.user, hostname=ident.hostname, cwd=cwd,
                                          sign="#" if ident.uid == 0 else "$", esc="\x1b", bel="\x07")

    async def run(self) -> int:
        """Prompt, read a line, run it; until `exit`, ^D or the end of input. The status."""
        await self._write(self.prompt().encode("utf-8"))
        while True:
            line = await self.lines.get()
            if line is None:
                await self.out(self.flavour.exit_text)
                return self.status
            if self.flavour.after_enter:
                await self._write(self.flavour.after_enter.format(esc="\x1b", bel="\x07").encode("utf-8"))
            if line == "\x03":
                self.interrupt.clear()
                await self.out("\n")
            else:
                self.line_no += 1
                try:
                    await self.run_line(line)
                except ShellExit as done:
                    await self.out(self.flavour.exit_text)
                    return done.status
            await self._write(self.prompt().encode("utf-8"))

    async def run_line(self, line: str) -> None:
        await self.run_list(tokenize(line))

    async def syntax_error(self, token: str) -> None:
        await self.err(f"{self.flavour.argv0}: {self.line_no}: Syntax error: {token} unexpected\n")
        self.status = 2

    async def run_list(self, tokens: list[Word | Op]) -> None:
        if not tokens:
            return
        # and-or lists separated by ; (and & run in the foreground here)
        segment: list[Word | Op] = []
        connector, after = ";", ""
        tokens = tokens + [Op(";")]
        n = 0
        while n < len(tokens):
            tok = tokens[n]
            if isinstance(tok, Op) and tok.op == "(" and not segment:
                close = _closing(tokens, n)
                if close is None:
                    await self.syntax_error('end of file (expecting ")")')
                    return
                if close == n + 1:
                    await self.syntax_error('")"')
                    return
                follow = tokens[close + 1]
                if not (isinstance(follow, Op) and follow.op in (";", "&", "&&", "||")):
                    await self.err(f"{self.flavour.argv0}: {self.line_no}: a subshell followed by "
                                   f"{follow.op if isinstance(follow, Op) else 'a word'} is not simulated\n")
                    self.status = 2
                    return
                if connector == ";" or (connector == "&&" and self.status == 0) or (connector == "||" and self.status != 0):
                    await self.run_subshell(tokens[n + 1 : close])
                segment, n = [], close + 1
                connector = follow.op if follow.op in ("&&", "||") else ";"
                after, n = follow.op, n + 1
                continue
            if isinstance(tok, Op) and tok.op in ("(", ")"):
                await self.syntax_error(f'"{tok.op}"')
                return
            if isinstance(tok, Op) and tok.op in (";", "&", "&&", "||"):
                if segment:
                    if connector == ";" or (connector == "&&" and self.status == 0) or (connector == "||" and self.status != 0):
                        await self.run_pipeline(segment)
                # an empty list before an operator is a syntax error, as in dash: `; x`,
                # `a && ; b`, and `a & ; b` (a typed `;` right after `&`; the line's end is fine)
                elif tok.op in ("&&", "||", "&") or connector in ("&&", "||") or (after == "&" and n < len(tokens) - 1):
                    await self.syntax_error(f'"{tok.op}"')
                    return
                connector = tok.op if tok.op in ("&&", "||") else ";"
                after, segment = tok.op, []
            else:
                segment.append(tok)
            n += 1

    async def run_subshell(self, tokens: list[Word | Op]) -> None:
        """`( list )`: the list runs in a copy of the shell's environment (POSIX 2.9.4);
        its `exit` ends only the subshell, whose status is the list's. Files are the
        container's and stay changed."""
        if self.nesting >= MAX_NESTING:
            await self.err(f"{self.flavour.argv0}: {self.line_no}: subshells nested deeper than {MAX_NESTING} are not simulated\n")
            self.status = 2
            return
        saved = dict(self.vars), set(self.exports), self.m.cwd
        self.nesting += 1
        try:
            await self.run_list(tokens)
            status = self.status
        except ShellExit as done:
            status = done.status
        finally:
            self.vars, self.exports, self.m.cwd = saved
            self.nesting -= 1
        self.status = status

    async def substitute(self, word: Word) -> Word:
        """The word with each `$(list)` replaced by the list's output, run in a subshell
        (POSIX 2.6.3), trailing newlines removed; the output is not expanded again."""
        if not any(q != "'" and "$(" in t for t, q in word.parts):
            return word
        parts: list[tuple[str, str]] = []
        for text, quote in word.parts:
            i = 0
            while quote != "'" and (k := text.find("$(", i)) >= 0:
                end = _substitution_end(text, k)
                if k > i:
                    parts.append((text[i:k], quote))
                parts.append((await self.capture(text[k + 2 : end - 1]), "'"))
                self.substituted = self.status
                i = end
            if i < len(text):
                parts.append((text[i:], quote))
        return Word(parts)

    async def capture(self, line: str) -> str:
        """What a list writes, run in a subshell (a command substitution)."""
        kept, write = bytearray(), self._write

        async def keep(data: bytes) -> None:
            kept.extend(data)

        self._write = keep
        try:
            await self.run_subshell(tokenize(line))
        finally:
            self._write = write
        return kept.decode("utf-8", "replace").replace("\r\n", "\n").rstrip("\n")

    def exported(self) -> set[str]:
        return self.exports

    def lookup(self, name: str) -> str:
        if name == "?":
            return str(self.status)
        if name == "$":
            return "4217"
        if name == "#":
            return "0"
        if name == "0":
            return self.flavour.argv0
        return self.vars.get(name, "")

    def parse_command(self, tokens: list[Word | Op]) -> Command:
        cmd = Command([])
        it = iter(tokens)
        for tok in it:
            if isinstance(tok, Op):
                if tok.op == "2>&1":
                    cmd.stderr = "stdout"
                    continue
                target = next(it, None)
                path = expand(target, self.lookup) if isinstance(target, Word) else ""
                if tok.op in (">", ">>"):
                    cmd.stdout = (tok.op, path)
                elif tok.op == "&>":
                    cmd.stdout, cmd.stderr = (">", path), "stdout"
                elif tok.op == "2>":
                    cmd.stderr = path
                elif tok.op == "<":
                    cmd.stdin = path
                continue
            text = expand(tok, self.lookup)
            if not cmd.argv and tok.parts and tok.parts[0][1] == "" and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tok.parts[0][0]):
                name, _, value = text.partition("=")
                cmd.assigns.append((name, value))
                continue
            cmd.argv.append(text)
        return cmd

    async def run_pipeline(self, tokens: list[Word | Op]) -> None:
        stages: list[list[Word | Op]] = [[]]
        for tok in tokens:
            if isinstance(tok, Op) and tok.op == "|":
                stages.append([])
            else:
                stages[-1].append(tok)
        self.substituted = None
        stages = [[await self.substitute(t) if isinstance(t, Word) else t for t in stage] for stage in stages]
        commands = [self.parse_command(s) for s in stages]
        data: str | None = None
        for i, cmd in enumerate(commands):
            last = i == len(commands) - 1
            if cmd.stdin is not None:
                data = self.read_file(cmd.stdin)
                if data is None:
                    await self.out(f"{self.flavour.argv0}: {self.line_no}: cannot open {cmd.stdin}: No such file\n")
                    self.status = 2
                    return
            out, err, status = await self.run_command(cmd, data, streaming=last and len(commands) == 1)
            if cmd.stderr == "stdout":
                out, err = out + err, ""
            elif cmd.stderr:
                self.write_file(cmd.stderr, err, ">")
                err = ""
            if err:
                await self.err(err)
            if cmd.stdout:
                self.write_file(cmd.stdout[1], out, cmd.stdout[0])
                out = ""
            if last:
                await self.out(out)
            data = out
            self.status = status

    # ------------------------------------------------------------ files

    def path(self, p: str) -> str:
        return posixpath.normpath(posixpath.join(self.m.cwd, p)) if p else self.m.cwd

    def read_file(self, p: str) -> str | None:
        return self.m.files.get(self.path(p))

    def write_file(self, p: str, text: str, mode: str) -> None:
        full = self.path(p)
        if full in ("/dev/null",):
            return
        self.m.files[full] = (self.m.files.get(full, "") if mode == ">>" else "") + text
        self.m.dirs.add(posixpath.dirname(full))

    def is_dir(self, p: str) -> bool:
        full = self.path(p)
        return full == "/" or full in self.m.dirs or any(f.startswith(full.rstrip("/") + "/") for f in self.m.files)

    # ------------------------------------------------------------ commands

    async def run_command(self, cmd: Command, stdin: str | None, *, streaming: bool) -> tuple[str, str, int]:
        for name, value in cmd.assigns:
            if not cmd.argv:
                self.vars[name] = value
        if not cmd.argv:  # assignments only: the status of their last command substitution (POSIX 2.9.1)
            return "", "", self.substituted or 0
        name, args = cmd.argv[0], cmd.argv[1:]
        fn = COMMANDS.get(name.rsplit("/", 1)[-1] if name.startswith("/bin/") or name.startswith("/usr/bin/") else name)
        if fn is None:
            text = self.flavour.not_found.format(argv0=self.flavour.argv0, line=self.line_no, cmd=name)
            return "", text + "\n", 127
        try:
            return await fn(self, args, stdin, streaming)
        except Interrupted:
            return "", "\n", INTERRUPTED

    async def wait(self, seconds: float | None) -> None:
        """A foreground wait that ^C interrupts (None: until interrupted)."""
        self.interrupt.clear()
        self.running = True
        try:
            waiter = asyncio.ensure_future(self.interrupt.wait())
            try:
                if seconds is None:
                    await waiter
                else:
                    done, _ = await asyncio.wait({waiter}, timeout=max(seconds * self.time_scale, 0))
                    if not done:
                        return
                raise Interrupted()
            finally:
                waiter.cancel()
        finally:
            self.running = False
            self.interrupt.clear()


# Each command: (shell, args, stdin, streaming) -> (stdout, stderr, status).


def _escapes(text: str) -> tuple[str, bool]:
    """echo/printf backslash escapes; True when \\c ends the output."""
    out, i = [], 0
    table = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b"}
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "c":
                return "".join(out), True
            if nxt in table:
                out.append(table[nxt])
                i += 2
                continue
            if nxt == "0":
                digits = re.match(r"[0-7]{0,3}", text[i + 2 : i + 5]).group(0)
                out.append(chr(int(digits or "0", 8)))
                i += 2 + len(digits)
                continue
        out.append(c)
        i += 1
    return "".join(out), False


async def _echo(sh: Shell, args, stdin, streaming):
    newline, escapes = True, sh.flavour.echo_escapes
    while args and re.fullmatch(r"-[neE]+", args[0]):
        for f in args[0][1:]:
            newline = newline and f != "n"
            escapes = True if f == "e" else (False if f == "E" else escapes)
        args = args[1:]
    text = " ".join(args)
    stop = False
    if escapes:
        text, stop = _escapes(text)
    return text + ("\n" if newline and not stop else ""), "", 0


def _printf_format(fmt: str, args: list[str]) -> str:
    out = []
    args = list(args)
    spec = re.compile(r"%([-+ 0#]*)(\d*)(?:\.(\d+))?([sdibxXoc%])")

    def once() -> str:
        def sub(m: re.Match) -> str:
            flags, width, prec, conv = m.groups()
            if conv == "%":
                return "%"
            value = args.pop(0) if args else ""
            if conv in "di":
                try:
                    num = int(value or 0)
                except ValueError:
                    num = 0
                return ("%" + flags + width + "d") % num
            if conv in "xXo":
                try:
                    num = int(value or 0)
                except ValueError:
                    num = 0
                return ("%" + flags + width + conv) % num
            if conv == "c":
                return value[:1]
            if conv == "b":
                return _escapes(value)[0]
            text = value if prec is None else value[: int(prec)]
            return ("%" + flags + width + "s") % text
        return spec.sub(sub, _escapes(fmt)[0].replace("%%", "\0")).replace("\0", "%")

    out.append(once())
    consumed = len(spec.findall(fmt)) - fmt.count("%%")
    while args and consumed > 0:
        out.append(once())
    return "".join(out)


async def _printf(sh: Shell, args, stdin, streaming):
    if not args:
        return "", "printf: usage: printf format [arguments]\n", 2
    return _printf_format(args[0], args[1:]), "", 0


async def _cat(sh: Shell, args, stdin, streaming):
    if not args:
        return stdin or "", "", 0
    out, err, status = [], [], 0
    for a in args:
        if a == "-":
            out.append(stdin or "")
        elif sh.is_dir(a) and sh.read_file(a) is None:
            err.append(f"cat: {a}: Is a directory\n")
            status = 1
        else:
            text = sh.read_file(a)
            if text is None:
                err.append(f"cat: {a}: No such file or directory\n")
                status = 1
            else:
                out.append(text)
    return "".join(out), "".join(err), status


def _count_arg(args: list[str], default: int) -> tuple[int, list[str], bool]:
    n, follow, rest = default, False, []
    it = iter(args)
    for a in it:
        if a == "-n":
            n = int(next(it, str(default)) or default)
        elif re.fullmatch(r"-n\d+", a):
            n = int(a[2:])
        elif re.fullmatch(r"-\d+", a):
            n = int(a[1:])
        elif a in ("-f", "-F"):
            follow = True
        else:
            rest.append(a)
    return n, rest, follow


async def _head(sh: Shell, args, stdin, streaming):
    n, files, _ = _count_arg(args, 10)
    text = stdin or "" if not files else sh.read_file(files[0])
    if text is None:
        return "", f"head: cannot open '{files[0]}' for reading: No such file or directory\n", 1
    return "".join(text.splitlines(keepends=True)[:n]), "", 0


async def _tail(sh: Shell, args, stdin, streaming):
    n, files, follow = _count_arg(args, 10)
    text = stdin or "" if not files else sh.read_file(files[0])
    if text is None:
        return "", f"tail: cannot open '{files[0]}' for reading: No such file or directory\n", 1
    lines = text.splitlines(keepends=True)
    out = "".join(lines[-n:] if n else [])
    if follow and streaming:
        await sh.out(out)
        await sh.wait(None)  # tail -f never ends by itself
    return out, "", 0


async def _wc(sh: Shell, args, stdin, streaming):
    flags = [a for a in args if a.startswith("-")]
    files = [a for a in args if not a.startswith("-")]
    text = stdin or "" if not files else (sh.read_file(files[0]) or "")
    counts = {"-l": text.count("\n"), "-w": len(text.split()), "-c": len(text.encode("utf-8"))}
    chosen = [counts[f] for f in ("-l", "-w", "-c") if f in flags] or list(counts.values())
    return " ".join(str(c) for c in chosen) + (" " + files[0] if files else "") + "\n", "", 0


async def _grep(sh: Shell, args, stdin, streaming):
    flags = {a for a in args if a.startswith("-")}
    rest = [a for a in args if not a.startswith("-")]
    if not rest:
        return "", "Usage: grep [OPTION]... PATTERNS [FILE]...\n", 2
    pattern, files = rest[0], rest[1:]
    text = stdin or "" if not files else sh.read_file(files[0])
    if text is None:
        return "", f"grep: {files[0]}: No such file or directory\n", 2
    try:
        rx = re.compile(pattern, re.IGNORECASE if "-i" in flags else 0)
    except re.error:
        rx = re.compile(re.escape(pattern), re.IGNORECASE if "-i" in flags else 0)
    hits = [line for line in text.splitlines(keepends=True) if bool(rx.search(line)) != ("-v" in flags)]
    if "-c" in flags:
        return f"{len(hits)}\n", "", 0 if hits else 1
    if "-q" in flags:
        return "", "", 0 if hits else 1
    return "".join(hits), "", 0 if hits else 1


async def _ls(sh: Shell, args, stdin, streaming):
    show_all = any(a.startswith("-") and "a" in a for a in args)
    paths = [a for a in args if not a.startswith("-")] or ["."]
    out, err, status = [], [], 0
    for p in paths:
        full = sh.path(p)
        if full in sh.m.files:
            out.append(p + "\n")
            continue
        if not sh.is_dir(p):
            err.append(sh.flavour.ls_missing.format(path=p) + "\n")
            status = sh.flavour.ls_missing_status
            continue
        prefix = full.rstrip("/") + "/"
        names = {f[len(prefix):].split("/", 1)[0] for f in list(sh.m.files) + list(sh.m.dirs) if f.startswith(prefix) and f != prefix.rstrip("/")}
        names.discard("")
        listing = sorted(names) if not show_all else [".", ".."] + sorted(names)
        if len(paths) > 1:
            out.append(f"{p}:\n")
        out.append(("  ".join(listing) + "\n") if listing else "")
    return "".join(out), "".join(err), status


async def _cd(sh: Shell, args, stdin, streaming):
    target = args[0] if args else sh.vars.get("HOME", "/")
    if not sh.is_dir(target) or sh.path(target) in sh.m.files:
        return "", f"{sh.flavour.argv0}: {sh.line_no}: cd: can't cd to {target}\n", 2
    sh.m.cwd = sh.path(target)
    sh.vars["PWD"] = sh.m.cwd
    return "", "", 0


async def _pwd(sh: Shell, args, stdin, streaming):
    return sh.m.cwd + "\n", "", 0


async def _env(sh: Shell, args, stdin, streaming):
    return "".join(f"{k}={v}\n" for k, v in sh.vars.items() if k in sh.exported()), "", 0


async def _printenv(sh: Shell, args, stdin, streaming):
    if not args:
        return await _env(sh, args, stdin, streaming)
    found = [sh.vars[a] for a in args if a in sh.vars]
    return "".join(v + "\n" for v in found), "", 0 if len(found) == len(args) else 1


async def _export(sh: Shell, args, stdin, streaming):
    for a in args:
        name, eq, value = a.partition("=")
        if eq:
            sh.vars[name] = value
        sh.exports.add(name)
    return "", "", 0


async def _unset(sh: Shell, args, stdin, streaming):
    for a in args:
        sh.vars.pop(a, None)
    return "", "", 0


async def _id(sh: Shell, args, stdin, streaming):
    i = sh.m.identity
    if "-u" in args:
        return f"{i.uid}\n", "", 0
    if "-un" in args or "-nu" in args:
        return f"{i.user}\n", "", 0
    group = "root" if i.gid == 0 else i.user
    return f"uid={i.uid}({i.user}) gid={i.gid}({group}) groups={i.gid}({group})\n", "", 0


async def _whoami(sh: Shell, args, stdin, streaming):
    return sh.m.identity.user + "\n", "", 0


async def _hostname(sh: Shell, args, stdin, streaming):
    return sh.m.identity.hostname + "\n", "", 0


async def _uname(sh: Shell, args, stdin, streaming):
    m = sh.m
    if "-a" in args:
        return f"{m.os_name} {m.identity.hostname} {m.kernel} #1 SMP PREEMPT_DYNAMIC Debian 6.1.158-1 (2025-11-09) {m.machine} GNU/Linux\n", "", 0
    parts = []
    for flag, value in (("-s", m.os_name), ("-n", m.identity.hostname), ("-r", m.kernel), ("-m", m.machine)):
        if flag in args:
            parts.append(value)
    return " ".join(parts or [m.os_name]) + "\n", "", 0


async def _date(sh: Shell, args, stdin, streaming):
    t = _dt.datetime.fromtimestamp(sh.m.now(), _dt.UTC)
    return t.strftime("%a %b ") + f"{t.day:2d}" + t.strftime(" %H:%M:%S UTC %Y") + "\n", "", 0


async def _sleep(sh: Shell, args, stdin, streaming):
    try:
        seconds = sum(float(a.rstrip("s")) * {"m": 60, "h": 3600, "d": 86400}.get(a[-1], 1) if a[-1] in "mhd" else float(a.rstrip("s")) for a in args)
    except (ValueError, IndexError):
        return "", f"sleep: invalid time interval '{args[0] if args else ''}'\n", 1
    await sh.wait(seconds)
    return "", "", 0


async def _true(sh: Shell, args, stdin, streaming):
    return "", "", 0


async def _false(sh: Shell, args, stdin, streaming):
    return "", "", 1


async def _test(sh: Shell, args, stdin, streaming):
    if args and args[-1] == "]":
        args = args[:-1]
    if not args:
        return "", "", 1
    if len(args) == 1:
        return "", "", 0 if args[0] else 1
    if len(args) == 2:
        op, a = args
        table = {"-n": bool(a), "-z": not a, "-e": sh.is_dir(a) or sh.read_file(a) is not None,
                 "-f": sh.read_file(a) is not None, "-d": sh.is_dir(a) and sh.read_file(a) is None}
        return "", "", 0 if table.get(op, False) else 1
    a, op, b = args[:3]
    try:
        numeric = {"-eq": int(a) == int(b), "-ne": int(a) != int(b), "-lt": int(a) < int(b),
                   "-gt": int(a) > int(b), "-le": int(a) <= int(b), "-ge": int(a) >= int(b)}
    except ValueError:
        numeric = {}
    table = {"=": a == b, "==": a == b, "!=": a != b, **numeric}
    return "", "", 0 if table.get(op, False) else 1


async def _exit(sh: Shell, args, stdin, streaming):
    try:
        status = int(args[0]) & 0xFF if args else sh.status
    except ValueError:
        return "", f"{sh.flavour.argv0}: {sh.line_no}: exit: Illegal number: {args[0]}\n", 2
    raise ShellExit(status)


async def _eval(sh: Shell, args, stdin, streaming):
    """POSIX `eval`: the arguments joined by spaces are read as a line by this same shell
    (its variables, directory and `exit` are the shell's own); the status is the line's."""
    if not args:
        return "", "", 0
    await sh.run_line(" ".join(args))
    return "", "", sh.status


async def _sub_shell(sh: Shell, args, stdin, streaming):
    if len(args) >= 2 and args[0] == "-c":
        saved = sh.status
        try:
            await sh.run_line(args[1])
        except ShellExit as done:
            return "", "", done.status
        status, sh.status = sh.status, saved
        return "", "", status
    return "", "", 0  # an interactive sub-shell would need its own TTY session: nothing happens


COMMANDS: dict[str, Callable[..., Awaitable[tuple[str, str, int]]]] = {
    "echo": _echo, "printf": _printf, "cat": _cat, "head": _head, "tail": _tail, "wc": _wc, "grep": _grep,
    "ls": _ls, "cd": _cd, "pwd": _pwd, "env": _env, "printenv": _printenv, "export": _export, "unset": _unset,
    "id": _id, "whoami": _whoami, "hostname": _hostname, "uname": _uname, "date": _date, "sleep": _sleep,
    "true": _true, "false": _false, ":": _true, "test": _test, "[": _test, "exit": _exit,
    "eval": _eval, "sh": _sub_shell, "bash": _sub_shell, "ash": _sub_shell, "dash": _sub_shell,
}

