"""The simulator's own error shapes (it imports nothing from the engine).

    Problem    one finding in a data file: file:line:col, JSON pointer, message, stable code
    DataError  the behaviour data or a state is invalid; `problems` lists every finding
    BindError  the simulator cannot listen on its address (`code`: port_in_use, listen_refused,
               listen_failed; `setting`: the flag that chose the address)

FaultError, KnobError and TemplateError stay beside the code that raises them (faults.py,
knobs.py, template.py).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, order=True)
class Problem:
    file: str
    line: int
    col: int
    pointer: str
    message: str
    code: str

    def format(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.pointer or '/'}: {self.message} [{self.code}]"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


class DataError(Exception):
    """The simulator's data is invalid; `problems` holds every problem found, sorted."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(p.format() for p in self.problems))


class BindError(Exception):
    """The listening socket cannot be bound: one line naming `setting`, with a stable `code`."""

    def __init__(self, message: str, *, setting: str, code: str):
        super().__init__(message)
        self.message, self.setting, self.code = message, setting, code

    def format(self) -> str:
        return f"{self.message} [{self.code}]"
