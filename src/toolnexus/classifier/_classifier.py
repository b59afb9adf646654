"""`Classifier` and `create_classifier`: typed decisions about a state, in one of four styles.

- `systemone` (default): POST the questions and the state to a SystemOne-style endpoint
  (`_systemone.py`) and read the typed answers back.
- `llm`: ask an ordinary tool-calling `Client` (one run, no tools) with a pinned prompt and read
  the JSON reply; answers are marked uncalibrated.
- `custom`: call the caller's `evaluate(state, questions)` (sync or async) and use its `Decision`.
- `static`: replay recorded responses keyed on the canonical request and state (tests, tapes).

Every `evaluate` emits exactly one `classifier.evaluate` metric event (ok or error) to this
classifier's `on_metric`, plus a one-time `classifier.warning` per degenerate choice question.

Choices beyond 0.21 (each closes a way a caller could be misled):
- every failure of `evaluate` is a `ClassifierError` (a custom function's exception, a
  non-JSON state, a malformed response) with one error event; a raising `on_metric` is reported
  once as a `[toolnexus]` warning and never fails the call;
- answers are held to the questions asked (`wire.check_decision`): by default as 0.21 fails, lazily
  — an unusable or missing answer raises only when that key is read, the rest of the decision is
  usable — or, with `strict=True`, at `evaluate`;
- `llm`: the classifier's `timeout` bounds the run, a missing reply model falls back to the
  client's model (not the SystemOne default), options the style cannot apply (headers, retries,
  request_params, body_transform, http_transport, ...) are reported once when the classifier is
  created, and the reply is scanned for the first JSON object that has `answers` (stray braces
  around it no longer break it);
- `evaluate_batch` stops starting queued states once one has failed.

Not here: the HTTP call and its retries (`_systemone.py`), shapes (`_models.py`), wire (`_wire.py`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from .._diag import warn, warn_once
from ._models import (
    CLASSIFIER_BACKENDS,
    DEFAULT_CLASSIFIER_API_KEY_ENV,
    DEFAULT_CLASSIFIER_BASE_URL,
    DEFAULT_CLASSIFIER_MODEL,
    DEFAULT_CLASSIFIER_TIMEOUT,
    METRIC_CLASSIFIER_EVALUATE,
    METRIC_CLASSIFIER_WARNING,
    ClassifierError,
    ClassifierUsage,
    Decision,
    Question,
    RecordedDecision,
)
from ._systemone import DEFAULT_MAX_RETRY_DELAY, RetrySettings, UrllibClassifierTransport, post_with_retries
from ._wire import (
    canonical_json,
    canonical_request,
    check_decision,
    check_questions,
    decode_decision,
    degenerate_reason,
    questions_wire,
)

STYLES = ("systemone", "llm", "custom", "static")

LLM_PROMPT = """Answer every question about the state below. Questions are INDEPENDENT: one answer is never context for another.

STATE:
{state}

QUESTIONS:
{questions}

Reply with JSON only, no prose and no code fence, shaped exactly:
{"answers":{"<key>":{"type":"noul","noul":0.0}}}
A "noul" answer is {"type":"noul","noul":<0..1>}. A "choice" answer is {"type":"choice","choice":"<one offered option id>","probabilities":{"<every offered option id>":<0..1>},"confidence":<0..1>}. A "score" answer is {"type":"score","score":<a number within the rubric bounds, fractional allowed>,"legend":{"0":"<level 0>",…},"probabilities":{"0":<0..1>,…},"confidence":<0..1>}."""  # noqa: E501 - the prompt's exact text

_SLOT = re.compile(r"\{(state|questions)\}")
_MAX_JSON_STARTS = 256
_DEGENERATE = ("classifier: question {key!r} has degenerate criteria ({reason}) — every option reads the same to the "
               "model and the answer ranks at chance; describe what picking each option would MEAN (SPEC.md §8B)")


def _record_parts(record: Any) -> tuple[Any, Any, Any]:
    if isinstance(record, RecordedDecision):
        return record.state, record.questions, record.response
    if isinstance(record, Mapping):
        return record["state"], record["questions"], record["response"]
    state, questions, response = record
    return state, questions, response


def _parse_recorded(response: Any) -> Any:
    if isinstance(response, (bytes, bytearray, str)):
        try:
            return json.loads(response)
        except ValueError as e:
            raise ClassifierError(f"classifier: static: the recorded response is not JSON: {e}") from None
    return response


def _first_answers_object(text: str) -> dict[str, Any]:
    """The first JSON object in `text` that has `answers` (scanning each `{`, a bounded number of them)."""
    starts = [m.start() for m in re.finditer(r"\{", text or "")][:_MAX_JSON_STARTS]
    if not starts:
        raise ClassifierError("classifier: llm: no JSON object in the reply")
    decoder = json.JSONDecoder()
    first_error: Optional[ValueError] = None
    decoded_any = False
    for start in starts:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError as e:
            first_error = first_error or e
            continue
        decoded_any = True
        if isinstance(obj, dict) and "answers" in obj:
            return obj
    if first_error is not None and not decoded_any:
        raise ClassifierError(f"classifier: llm: {first_error}")
    raise ClassifierError('classifier: llm: no JSON object with "answers" in the reply')


class Classifier:
    """Typed decisions about a state. Build one with `create_classifier` (which checks its options)."""

    def __init__(self, *, style: str = "systemone", base_url: str = DEFAULT_CLASSIFIER_BASE_URL,
                 model: str = DEFAULT_CLASSIFIER_MODEL, api_key_env: str = DEFAULT_CLASSIFIER_API_KEY_ENV,
                 headers: Optional[dict[str, str]] = None, timeout: float = DEFAULT_CLASSIFIER_TIMEOUT,
                 http_transport: Any = None, retries: Optional[int] = 2, retry_base_ms: int = 500,
                 retryable_statuses: Optional[Iterable[int]] = None, on_error: Optional[Callable[..., Any]] = None,
                 request_params: Optional[dict[str, Any]] = None,
                 body_transform: Optional[Callable[[dict], Optional[dict]]] = None,
                 on_metric: Optional[Callable[[dict], None]] = None, client: Any = None,
                 evaluate: Optional[Callable[..., Any]] = None, decisions: Optional[Sequence[Any]] = None,
                 max_retry_delay: Optional[float] = DEFAULT_MAX_RETRY_DELAY, deadline: Optional[float] = None,
                 strict: bool = False) -> None:
        self.style = style
        self.base_url = base_url
        self.model = model
        self.api_key_env = api_key_env
        self.headers = headers
        self.timeout = timeout
        self.http_transport = http_transport if http_transport is not None else UrllibClassifierTransport()
        self.retries = retries
        self.retry_base_ms = retry_base_ms
        self.retryable_statuses = frozenset(retryable_statuses) if retryable_statuses is not None else None
        self.on_error = on_error
        self.request_params = request_params
        self.body_transform = body_transform
        self.on_metric = on_metric
        self.client = client
        self.evaluate_fn = evaluate
        self.decisions = list(decisions) if decisions is not None else None
        self.max_retry_delay = max_retry_delay
        self.deadline = deadline
        self.strict = strict
        self._records: Optional[dict[bytes, Any]] = None
        self._warned: set[str] = set()
        self._caller: Any = None

    def __repr__(self) -> str:
        return f"Classifier(style={self.style!r}, base_url={self.base_url!r}, model={self.model!r})"

    # -- metrics --------------------------------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        sink = self.on_metric
        if sink is None:
            return
        try:
            sink(event)
        except Exception as e:
            warn_once(f"classifier-sink:{id(self)}:{type(e).__name__}",
                      f"[toolnexus] classifier on_metric raised {type(e).__name__}: {e} — event dropped")

    def _event_model(self) -> str:
        if self.style == "llm" and self.client is not None and getattr(self.client, "model", None):
            return str(self.client.model)
        return self.model

    def _warn_degenerate(self, questions: Mapping[str, Question]) -> None:
        for key in sorted(questions):
            reason = degenerate_reason(questions[key])
            if reason is None or key in self._warned:
                continue
            self._warned.add(key)
            self._emit({"event": METRIC_CLASSIFIER_WARNING, "question": key,
                        "warning": _DEGENERATE.format(key=key, reason=reason)})

    # -- evaluate ---------------------------------------------------------------------------------------

    async def evaluate(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        """Answer `questions` about `state` (see the module docstring); one metric event either way."""
        started = time.monotonic()
        try:
            decision = await self._evaluate(state, questions)
        except Exception as e:
            error = e if isinstance(e, ClassifierError) else ClassifierError(f"classifier: {type(e).__name__}: {e}")
            self._emit({"event": METRIC_CLASSIFIER_EVALUATE, "model": self._event_model(), "status": "error",
                        "ms": int((time.monotonic() - started) * 1000), "error": str(error)})
            if error is e:
                raise
            raise error from e
        self._emit({"event": METRIC_CLASSIFIER_EVALUATE, "model": decision.model or self._event_model(),
                    "status": "ok", "ms": int((time.monotonic() - started) * 1000),
                    "prompt_tokens": decision.usage.input_tokens, "completion_tokens": decision.usage.output_tokens})
        return decision

    async def _evaluate(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        if not isinstance(questions, Mapping):
            raise ClassifierError(f"classifier: questions must be a mapping of key -> question, "
                                  f"got {type(questions).__name__}")
        check_questions(questions)
        self._warn_degenerate(questions)
        runner = {"systemone": self._systemone, "llm": self._llm, "custom": self._custom,
                  "static": self._static}.get(self.style)
        if runner is None:
            raise ClassifierError(f"classifier: unknown style {self.style!r}")
        return check_decision(await runner(state, questions), questions, strict=self.strict)

    async def evaluate_batch(self, states: Iterable[Any], questions: Mapping[str, Question], *,
                             concurrency: int = 16) -> list[Decision]:
        """`evaluate` per state, at most `concurrency` at once, results in state order; all or nothing."""
        items = list(states)
        if not items:
            raise ClassifierError("classifier: evaluate_batch: no states to evaluate")
        gate = asyncio.Semaphore(max(1, int(concurrency)))
        results: list[Optional[Decision]] = [None] * len(items)
        errors: dict[int, Exception] = {}

        async def one(i: int, st: Any) -> None:
            async with gate:
                if errors:  # a state failed: queued ones are not started
                    return
                try:
                    results[i] = await self.evaluate(st, questions)
                except Exception as e:
                    errors[i] = e

        await asyncio.gather(*(one(i, st) for i, st in enumerate(items)))
        if errors:
            first = min(errors)
            raise ClassifierError(f"classifier: evaluate_batch: state {first}: {errors[first]}") from errors[first]
        return results  # type: ignore[return-value]

    # -- styles -------------------------------------------------------------------------------------------

    def _transport_caller(self) -> Any:
        if self._caller is None:
            from ..client._transport import as_async_transport

            self._caller = as_async_transport(self.http_transport)
        return self._caller

    @staticmethod
    def _json(value: Any) -> bytes:
        try:
            return canonical_json(value)
        except (TypeError, ValueError) as e:
            raise ClassifierError(f"classifier: the request is not JSON-serialisable — check the state: {e}") from None

    async def _systemone(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        body: Any = {"model": self.model, "questions": questions_wire(questions), "state": state}
        body.update(self.request_params or {})
        if self.body_transform is not None:
            out = self.body_transform(body)
            if out is not None:
                body = out
        payload = self._json(body)
        settings = RetrySettings(self.retries, self.retry_base_ms, self.retryable_statuses, self.on_error,
                                 self.max_retry_delay, self.deadline)
        raw = await post_with_retries(self._transport_caller(), self.base_url.rstrip("/") + "/systemone",
                                      self.api_key_env, self.headers, payload, self.timeout, settings)
        try:
            parsed = json.loads(raw)
        except ValueError as e:
            raise ClassifierError(f"classifier: unparseable response: {e}") from None
        return decode_decision(parsed)

    async def _llm(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        from ..toolkit import Toolkit

        slots = {"state": self._json(state).decode("utf-8"),
                 "questions": self._json(questions_wire(questions)).decode("utf-8")}
        prompt = _SLOT.sub(lambda m: slots[m.group(1)], LLM_PROMPT)
        try:
            result = await asyncio.wait_for(self.client.run(prompt, Toolkit(None, None, [], [], [])),
                                            timeout=self.timeout)
        except TimeoutError:
            raise ClassifierError(
                f"classifier: llm: no reply within the classifier timeout of {self.timeout}s"
            ) from None
        except ClassifierError:
            raise
        except Exception as e:
            raise ClassifierError(f"classifier: llm: {type(e).__name__}: {e}") from e
        decision = decode_decision(_first_answers_object(result.text))
        usage = result.usage or {}
        decision.calibrated = False
        decision.model = decision.model or str(getattr(result, "model", "") or self._event_model())
        decision.usage = ClassifierUsage(int(usage.get("prompt_tokens", 0) or 0),
                                         int(usage.get("completion_tokens", 0) or 0))
        return decision

    async def _custom(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        try:
            out = self.evaluate_fn(state, questions)  # type: ignore[misc]
            if inspect.isawaitable(out):
                out = await out
        except ClassifierError:
            raise
        except Exception as e:
            raise ClassifierError(f"classifier: custom evaluate raised {type(e).__name__}: {e}") from e
        if not isinstance(out, Decision):
            raise ClassifierError(f"classifier: custom evaluate returned {type(out).__name__}, not a Decision")
        return out

    def _static_key(self, state: Any, questions: Mapping[str, Question]) -> bytes:
        return canonical_request(self.model, questions) + b"\x00" + self._json(state)

    def _index_records(self) -> dict[bytes, Any]:
        """Key every recorded decision now (`create_classifier` does this before any call)."""
        records: dict[bytes, Any] = {}
        for i, record in enumerate(self.decisions or []):
            try:
                state, recorded_questions, response = _record_parts(record)
                if not isinstance(recorded_questions, Mapping):
                    raise ClassifierError(f"questions must be a mapping of key -> question, "
                                          f"got {type(recorded_questions).__name__}")
                if not isinstance(response, (Mapping, bytes, bytearray, str)):
                    raise ClassifierError(
                        f"response must be a JSON object, bytes or str, got {type(response).__name__}"
                    )
                records[self._static_key(state, recorded_questions)] = response
            except Exception as e:
                raise ClassifierError(f"classifier: recorded decision {i}: {e}") from None
        self._records = records
        return records

    async def _static(self, state: Any, questions: Mapping[str, Question]) -> Decision:
        records = self._records if self._records is not None else self._index_records()
        key = self._static_key(state, questions)
        if key not in records:
            raise ClassifierError("classifier: static: no recorded decision for this request+state")
        return decode_decision(_parse_recorded(records[key]))


_LLM_IGNORED = ("headers", "http_transport", "retries", "retry_base_ms", "retryable_statuses", "on_error",
                "request_params", "body_transform", "max_retry_delay", "deadline")


def create_classifier(*, style: str = "systemone", backend: Optional[str] = None, base_url: Optional[str] = None,
                      model: Optional[str] = None, api_key_env: Optional[str] = None,
                      headers: Optional[dict[str, str]] = None, timeout: Optional[float] = None,
                      http_transport: Any = None, retries: Optional[int] = 2, retry_base_ms: int = 500,
                      retryable_statuses: Optional[Iterable[int]] = None,
                      on_error: Optional[Callable[..., Any]] = None, request_params: Optional[dict[str, Any]] = None,
                      body_transform: Optional[Callable[[dict], Optional[dict]]] = None,
                      on_metric: Optional[Callable[[dict], None]] = None, client: Any = None,
                      evaluate: Optional[Callable[..., Any]] = None, decisions: Optional[Sequence[Any]] = None,
                      max_retry_delay: Optional[float] = DEFAULT_MAX_RETRY_DELAY,
                      deadline: Optional[float] = None, strict: bool = False) -> Classifier:
    """A checked `Classifier`; every problem is a `ClassifierError` raised before any I/O.

    `max_retry_delay` (seconds, default 30) caps each retry wait, `Retry-After` included;
    `deadline` (seconds, default none) bounds a whole `systemone` call, retries included.
    `strict=True` makes `evaluate` fail when any question lacks a usable answer; by default (0.21's
    behaviour) the decision comes back and only reading such an answer raises.
    """
    if style not in STYLES:
        raise ClassifierError(f"classifier: unknown style {style!r}")
    if backend is not None:
        if backend not in CLASSIFIER_BACKENDS:
            raise ClassifierError(f"classifier: unknown backend {backend!r} (known: "
                                  f"{', '.join(sorted(CLASSIFIER_BACKENDS))})")
        fields = CLASSIFIER_BACKENDS[backend]
        base_url = base_url or fields["base_url"]
        model = model or fields["model"]
        api_key_env = api_key_env or fields["api_key_env"]
    base_url = base_url or DEFAULT_CLASSIFIER_BASE_URL
    model = model or DEFAULT_CLASSIFIER_MODEL
    if "openrouter.ai" in base_url and model == "jev-latest":
        raise ClassifierError('classifier: model "jev-latest" is TypeSafe\'s spelling; on openrouter.ai use '
                              '"typesafe/jev-1.13"')
    if style == "llm" and client is None:
        raise ClassifierError("classifier: style 'llm' requires client")
    if style == "custom" and evaluate is None:
        raise ClassifierError("classifier: style 'custom' requires evaluate")
    if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
        raise ClassifierError(f"classifier: retries must be None or an int >= 0, got {retries!r}")
    if style == "llm":
        given = {"headers": headers, "http_transport": http_transport, "retries": retries != 2 or None,
                 "retry_base_ms": retry_base_ms != 500 or None, "retryable_statuses": retryable_statuses,
                 "on_error": on_error, "request_params": request_params, "body_transform": body_transform,
                 "max_retry_delay": max_retry_delay != DEFAULT_MAX_RETRY_DELAY or None, "deadline": deadline}
        ignored = [name for name in _LLM_IGNORED if given[name] is not None]
        if ignored:
            warn(f"[toolnexus] classifier: style 'llm' ignores {', '.join(ignored)} — the client's own settings "
                 "apply to its run")
    classifier = Classifier(style=style, base_url=base_url, model=model,
                            api_key_env=api_key_env or DEFAULT_CLASSIFIER_API_KEY_ENV, headers=headers,
                            timeout=timeout or DEFAULT_CLASSIFIER_TIMEOUT, http_transport=http_transport,
                            retries=retries, retry_base_ms=retry_base_ms, retryable_statuses=retryable_statuses,
                            on_error=on_error, request_params=request_params, body_transform=body_transform,
                            on_metric=on_metric, client=client, evaluate=evaluate, decisions=decisions,
                            max_retry_delay=max_retry_delay, deadline=deadline, strict=strict)
    if style == "static":
        classifier._index_records()
    return classifier


