"""config.pbtxt as the student writes it: text parsed the way Triton parses it, refused with its line.

Triton reads a model's config.pbtxt with protobuf's text format into ``inference.ModelConfig``
(``model_config.proto``); so does ``parse_edit``, through tritonclient's ``model_config_pb2``. A
malformed text never reaches the server: ``ConfigTextError`` names the line, shows it, and says the
fix (the field meant, the brace to close). ``merge_edit`` writes the fields the text names over the
model's live config: each top-level field written replaces that field whole, the others stay.
"""

from __future__ import annotations

import difflib
import re

from google.protobuf import descriptor_pool, text_format

from servelab.triton.config import ConfigError, ModelConfig, config_text, mc

_NO_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "(\w+)"')
_NO_ENUM = re.compile(r'Enum type "([\w.]+)" has no value named (\w+)')
_EXPECTED = re.compile(r'Expected "(.)"')


class ConfigTextError(ConfigError):
    """The student's config text, refused before it reached the server: the line and the fix."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def _fields(type_name: str) -> list[str]:
    try:
        return [f.name for f in descriptor_pool.Default().FindMessageTypeByName(type_name).fields]
    except KeyError:
        return []


def _enum_values(type_name: str) -> list[str]:
    try:
        return [v.name for v in descriptor_pool.Default().FindEnumTypeByName(type_name).values]
    except KeyError:
        return []


def _closest(word: str, choices: list[str]) -> str:
    near = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f"did you mean `{near[0]}`?" if near else f"the fields it takes: {', '.join(choices)}"


def fix_for(message: str, text: str) -> str:
    """What to change, from protobuf's parse message (the field meant, the brace to close)."""
    if (m := _NO_FIELD.search(message)):
        short = m.group(1).split(".")[-1]
        near = _closest(m.group(2), _fields(m.group(1)))
        return f"`{m.group(2)}` is not a field of {short}: {near}"
    if (m := _NO_ENUM.search(message)):
        values = _enum_values(m.group(1))
        close = difflib.get_close_matches(m.group(2), values, n=1, cutoff=0.5)
        return f"`{m.group(2)}` is not a value of {m.group(1).split('.')[-1]}: " + (
            f"did you mean `{close[0]}`?" if close else f"use one of {', '.join(values)}")
    opened, closed = text.count("{") - text.count("}"), text.count("[") - text.count("]")
    if (m := _EXPECTED.search(message)) or opened or closed:
        if opened > 0 or (m and m.group(1) == "}"):
            return "a block opened with `{` is not closed: add its `}`"
        if opened < 0:
            return "a `}` closes a block that was never opened: remove it, or add the `name {` it closes"
        if closed > 0 or (m and m.group(1) == "]"):
            return "a list opened with `[` is not closed: add its `]`"
        if m:
            return f"write `{m.group(1)}` here"
    return "write each field as `name: value` and each block as `name { … }`, as in the config above"


def parse_edit(text: str, name: str = "config.pbtxt") -> ModelConfig:
    """The student's text → ModelConfig, as Triton would read it; ``ConfigTextError`` names the line."""
    cfg = mc.ModelConfig()
    try:
        text_format.Parse(text, cfg)
    except text_format.ParseError as exc:
        line = exc.GetLine() if exc.GetLine() and exc.GetLine() > 0 else None
        lines = text.splitlines()
        if line is not None and line > len(lines):  # an unclosed block is found at the end of the text
            line = len(lines)
        where = f"line {line}" if line else "the text"
        shown = f"\n  {line} | {lines[line - 1].rstrip()}" if line and lines else ""
        reason = re.sub(r"^\d+:\d+ : ", "", str(exc))
        raise ConfigTextError(f"{name}, {where}: {fix_for(str(exc), text)} (Triton would refuse it: "
                              f"{reason}){shown}", line) from None
    return cfg


def merge_edit(live: ModelConfig, edit: ModelConfig) -> ModelConfig:
    """``live`` with every top-level field ``edit`` sets replaced by ``edit``'s (a block written whole)."""
    new = mc.ModelConfig()
    new.CopyFrom(live)
    for field, _value in edit.ListFields():
        new.ClearField(field.name)
    new.MergeFrom(edit)
    return new


def named_fields(edit: ModelConfig) -> list[str]:
    """The top-level fields the text sets (``instance_group``, ``dynamic_batching``…)."""
    return [field.name for field, _value in edit.ListFields()]


def block_text(cfg: ModelConfig, field: str) -> str:
    """One top-level field of ``cfg`` in config.pbtxt's text ('' when unset): what a check quotes."""
    part = mc.ModelConfig()
    part.CopyFrom(cfg)
    for other, _value in part.ListFields():
        if other.name != field:
            part.ClearField(other.name)
    return str(config_text(part))
