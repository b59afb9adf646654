"""Structured output: a run whose final answer is a validated, typed value (`output_type=`).

`client.run(prompt, toolkit, output_type=Weather)` (also `ask`, `stream`'s `done` result, the
durable-resume methods and agents) ends with `result.output` holding a `Weather` instance and
`result.text` holding its JSON. `output_type` is a pydantic model class, a dataclass, any other
type pydantic can validate (`list[Item]`, `int`, a `TypedDict`...), or a JSON Schema dict (the
output is then the validated JSON value).

How the model delivers it: a `final_result` tool. The run declares one extra tool whose input
schema *is* the output schema; the model ends the run by calling it. We chose this over the
providers' native JSON modes because it is the one mechanism both wires share: OpenAI's
`response_format` has no Anthropic counterpart other than forcing a tool, forcing a tool
(`tool_choice`) would stop the model from calling the run's other tools first, and many
OpenAI-compatible servers ignore `response_format` altogether, while every endpoint this client
can drive already speaks tool calls. A plain-text final answer is still accepted when it is
valid JSON for the output type (an optional ```json fence is stripped): some models answer that
way however the tool is described.

Validation and retries: the arguments are validated against the type (pydantic for Python types,
JSON Schema for a schema dict). A rejected attempt — a `final_result` call that does not
validate, or a plain-text answer — costs one retry and tells the model exactly what was wrong:
the rejected call gets the error result `final_result rejected: <path>: <reason>; … Fix these
and call final_result again.`, a text answer is followed by a user message (`TEXT_RETRY`, or
`JSON_RETRY` when it was JSON that did not validate). After `output_retries` retries (default 2,
so three attempts) the run gives up with `OutputValidationError`, whose `result` is the run so
far (transcript, usage) and whose `problems` are the last attempt's.

Other calls in the turn that calls `final_result` run as usual (their results are recorded);
the run ends after that turn. A run that halts on a suspension returns `status="pending"` with
no output; resuming it with the same `output_type` carries on. With an `output_type`, running
out of `max_turns` is always `status="incomplete"` (never a "done" without an output).

Not here: the turn loop (_loop.py calls `OutputRun` at the two places a run can end), schemas
and pydantic validation (`toolnexus._typed`).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from .._encoded import EncodedList
from .._schema import schema_problems
from .._typed import Adapter, ArgumentProblems, json_default, pydantic_schema
from ..adapters import to_anthropic, to_openai
from ..errors import ToolnexusError, ToolnexusTypeError, ToolnexusValueError
from ..types import Tool, ToolResult
from ._result import declares_shared

FINAL_RESULT_TOOL = "final_result"
DEFAULT_OUTPUT_RETRIES = 2
FINAL_RESULT_DESCRIPTION = ("Give your final answer by calling this tool; its arguments are the answer. "
                            "Call it once, when you are done.")
ACCEPTED_TEXT = "final result accepted"
REJECTED = "final_result rejected: {problems}. Fix these and call final_result again."
TEXT_RETRY = ("Your answer must be given by calling the final_result tool with arguments that match its schema; "
              "plain text is not accepted. Call final_result now.")
JSON_RETRY = "Your answer does not match the required schema: {problems}. Call final_result with every problem fixed."
GAVE_UP = "toolnexus: the model's final answer did not match {name} after {attempts} attempt{s}: {problems}"
NOT_CALLED = "it answered in plain text instead of calling final_result"
_WRAP_KEY = "response"
_FENCE = re.compile(r"^```(?:json)?\s*\n(.*?)\n?```$", re.DOTALL)


class OutputValidationError(ToolnexusError, ValueError):
    """The model's final answer did not match the `output_type` within the allowed retries.

    `result` is the run up to that point (its transcript, usage, tool calls); `problems` are the
    `path: reason` lines of the last rejected attempt.
    """

    def __init__(self, message: str, result: Any, problems: list[str]) -> None:
        super().__init__(message)
        self.result = result
        self.problems = problems


def _problems_text(problems: list[str]) -> str:
    """At most `MAX_PROBLEMS` problems on one line, then `(+N more)`."""
    return ArgumentProblems(problems).text()


@dataclass
class OutputSpec:
    """What a run must end with: the type, its `final_result` schema and how to validate it."""

    output_type: Any
    retries: int
    name: str
    schema: dict[str, Any]
    wrapped: bool
    adapter: Optional[Adapter] = None

    def validate(self, args: Any) -> Any:
        """The output value for `final_result` arguments; `ArgumentProblems` if they do not fit."""
        if self.adapter is None:
            problems = schema_problems(self.schema, args)
            if problems:
                raise ArgumentProblems(problems)
            return args[_WRAP_KEY] if self.wrapped else args
        if not self.wrapped:
            return self.adapter.validate(args, "")
        if not isinstance(args, dict) or _WRAP_KEY not in args:
            raise ArgumentProblems([f"'{_WRAP_KEY}' is a required property"])
        return self.adapter.validate(args[_WRAP_KEY], _WRAP_KEY)

    def validate_value(self, value: Any) -> Any:
        """Validate the bare output value (a JSON text answer, not the tool's argument object)."""
        return self.validate({_WRAP_KEY: value} if self.wrapped else value)

    def dump(self, value: Any) -> str:
        """The output as JSON text (what `RunResult.text` carries)."""
        return json.dumps(value, default=json_default)

    def tool(self) -> Tool:
        async def execute(args: Any = None, ctx: Any = None) -> ToolResult:
            return self.check(args)

        return Tool(FINAL_RESULT_TOOL, FINAL_RESULT_DESCRIPTION, self.schema, "native", execute)

    def check(self, args: Any) -> ToolResult:
        """The `final_result` tool's result for `args`: accepted, or the pinned rejection."""
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as exc:
                return ToolResult(REJECTED.format(problems=f"the arguments are not valid JSON ({exc})"), True)
        try:
            self.validate(args if args is not None else {})
        except ArgumentProblems as exc:
            return ToolResult(REJECTED.format(problems=exc.text()), True)
        return ToolResult(ACCEPTED_TEXT, False)


def _type_name(output_type: Any) -> str:
    if isinstance(output_type, dict):
        title = output_type.get("title")
        return f"the output schema {title!r}" if isinstance(title, str) and title else "the output schema"
    return getattr(output_type, "__name__", None) or repr(output_type)


@functools.lru_cache(maxsize=256)
def _described(output_type: Any) -> tuple[dict[str, Any], dict[str, Any], Adapter]:
    """Schema, kept `$defs` and validator of a Python output type (cached: every run asks again)."""
    try:
        schema, defs = pydantic_schema(output_type)
    except Exception as exc:  # pydantic cannot build a schema for it
        raise ToolnexusTypeError(f"toolnexus: output_type {output_type!r} cannot be validated: {exc}") from None
    return schema, defs, Adapter(output_type)


def output_spec(output_type: Any, retries: int = DEFAULT_OUTPUT_RETRIES) -> OutputSpec:
    """Check `output_type` and build its spec (a clear `TypeError`/`ValueError` up front if unusable)."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ToolnexusValueError(f"toolnexus: output_retries must be an integer >= 0, got {retries!r}")
    adapter: Optional[Adapter] = None
    if isinstance(output_type, dict):
        from jsonschema import Draft202012Validator
        from jsonschema.exceptions import SchemaError

        try:
            Draft202012Validator.check_schema(output_type)
        except SchemaError as exc:
            raise ToolnexusValueError(f"toolnexus: output_type is not a valid JSON Schema: {exc.message}") from None
        schema: dict[str, Any] = dict(output_type)
        defs: dict[str, Any] = {}
    else:
        if output_type is None or isinstance(output_type, (str, int, float, bool)):
            raise ToolnexusTypeError(
                "toolnexus: output_type must be a pydantic model class, a dataclass, a type pydantic "
                f"can validate, or a JSON Schema dict; got {output_type!r}"
            )
        try:
            schema, defs, adapter = _described(output_type)
        except TypeError as exc:
            if "unhashable" not in str(exc):
                raise
            schema, defs, adapter = _described.__wrapped__(output_type)
        schema = copy.deepcopy(schema)  # the cached one stays pristine
    wrapped = schema.get("type") != "object"
    if wrapped:
        schema = {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY],
                  "additionalProperties": False}
    if defs:
        schema = {**schema, "$defs": {**schema.get("$defs", {}), **defs}}
    return OutputSpec(output_type, retries, _type_name(output_type), schema, wrapped, adapter)


class OutputToolkit:
    """A toolkit (or none) plus the `final_result` tool; everything else is the inner toolkit's."""

    def __init__(self, inner: Any, spec: OutputSpec) -> None:
        if inner is not None and inner.get(FINAL_RESULT_TOOL) is not None:
            raise ToolnexusValueError(
                f'toolnexus: output_type needs the tool name "{FINAL_RESULT_TOOL}", but the toolkit '
                "already has a tool with that name; rename that tool"
            )
        self.inner = inner
        self.output_spec = spec
        self._tool = spec.tool()

    def get(self, name: str) -> Optional[Tool]:
        if name == FINAL_RESULT_TOOL:
            return self._tool
        return self.inner.get(name) if self.inner is not None else None

    def tools(self) -> list[Tool]:
        return [*(self.inner.tools() if self.inner is not None else []), self._tool]

    def skills_prompt(self) -> str:
        return self.inner.skills_prompt() if self.inner is not None else ""

    def to_openai(self) -> list[dict[str, Any]]:
        return [*(self.inner.to_openai() if self.inner is not None else []), *to_openai([self._tool])]

    def to_anthropic(self) -> list[dict[str, Any]]:
        return [*(self.inner.to_anthropic() if self.inner is not None else []), *to_anthropic([self._tool])]

    def declarations(self, style: str) -> EncodedList:
        """The inner toolkit's shared declarations (see `Toolkit.declarations`) plus `final_result`."""
        own = EncodedList((to_anthropic if style == "anthropic" else to_openai)([self._tool]))
        inner = self.inner
        if inner is not None and declares_shared(inner):
            shared = inner.declarations(style)
            return EncodedList([*shared, *own], [*shared.chunks, *own.chunks])
        theirs = [] if inner is None else (inner.to_anthropic() if style == "anthropic" else inner.to_openai())
        return EncodedList([*theirs, *own])

    async def execute(self, name: str, args: Any = None, ctx: Any = None) -> ToolResult:
        if name == FINAL_RESULT_TOOL:
            return self.output_spec.check(args)
        if self.inner is None:
            return ToolResult(output=f"unknown tool: {name}", is_error=True)
        result: ToolResult = await self.inner.execute(name, args, ctx)
        return result

    def __getattr__(self, name: str) -> Any:  # close(), mcp_status(), ... of the inner toolkit
        inner = self.__dict__.get("inner")
        if inner is None:
            raise AttributeError(name)
        return getattr(inner, name)


def with_output(toolkit: Any, output_type: Any, retries: int = DEFAULT_OUTPUT_RETRIES) -> Any:
    """`toolkit` wrapped so that a run on it must end with an `output_type` value (unchanged if None)."""
    if output_type is None:
        return toolkit
    if isinstance(toolkit, OutputToolkit):
        toolkit = toolkit.inner
    return OutputToolkit(toolkit, output_spec(output_type, retries))


@dataclass
class Verdict:
    """How one attempt ended: accepted (`value`, `text`), or a `retry` message for the model."""

    accepted: bool
    value: Any = None
    text: str = ""
    retry: Optional[str] = None


class OutputRun:
    """The structured-output state of one run: counts rejected attempts, decides accept/retry/give up."""

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.failures = 0

    @classmethod
    def of(cls, toolkit: Any) -> Optional["OutputRun"]:
        spec = toolkit.output_spec if isinstance(toolkit, OutputToolkit) else None
        return cls(spec) if spec is not None else None

    def _reject(self, problems: list[str], result: Any) -> None:
        """Count a rejected attempt; past the retries, give up."""
        self.failures += 1
        if self.failures > self.spec.retries:
            attempts = self.failures
            raise OutputValidationError(
                GAVE_UP.format(name=self.spec.name, attempts=attempts, s="" if attempts == 1 else "s",
                               problems=_problems_text(problems) if problems else NOT_CALLED),
                result, problems)

    def after_tools(self, records: list[dict[str, Any]], result: Any) -> Optional[Verdict]:
        """After a tool turn: the accepted output; else None — the run goes on, and if the turn's
        `final_result` calls were all rejected that counts as one failed attempt (which may give up)."""
        calls = [r for r in records if r.get("name") == FINAL_RESULT_TOOL]
        if not calls:
            return None
        for record in calls:
            if not record.get("is_error"):
                try:
                    value = self.spec.validate(record.get("args") or {})
                except ArgumentProblems:  # a hook rewrote the result; the arguments are the truth
                    continue
                return Verdict(True, value, self.spec.dump(value))
        last = calls[-1]
        problems: list[str] = []
        try:
            self.spec.validate(last.get("args") or {})
        except ArgumentProblems as exc:
            problems = exc.problems
        self._reject(problems or [str(last.get("output") or "")], result)
        return None

    def after_text(self, text: str, result: Any) -> Verdict:
        """A turn without tool calls: accept valid JSON text, else a retry message (or give up)."""
        raw = text.strip()
        fenced = _FENCE.match(raw)
        if fenced:
            raw = fenced.group(1).strip()
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, ValueError):
            self._reject([NOT_CALLED], result)
            return Verdict(False, retry=TEXT_RETRY)
        try:
            value = self.spec.validate_value(data)
        except ArgumentProblems as exc:
            self._reject(exc.problems, result)
            return Verdict(False, retry=JSON_RETRY.format(problems=exc.text()))
        return Verdict(True, value, self.spec.dump(value))
