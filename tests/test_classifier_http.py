"""The systemone style over the transport seam (scripted transports, and the default urllib transport
against a real loopback server): body bytes, headers, retries, errors, redaction; and the fixes beyond 0.21."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest

from support.llm_server import Json, LlmServer
from toolnexus.classifier import (
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierError,
    ClassifierResponse,
    Decision,
    NoulAnswer,
    NoulQuestion,
    ScoreQuestion,
    canonical_json,
    create_classifier,
    questions_wire,
)
from toolnexus.client import create_in_process_client

URL = "https://clf.example/v1"
QS = {"toxic": NoulQuestion("Is `text` toxic?"),
      "lang": ChoiceQuestion("Which language is `text`?", {"en": "English", "fr": "French"}),
      "tone": ScoreQuestion("How formal is `text`?", ["casual", "neutral", "formal"])}
ANSWERS = {"toxic": {"type": "noul", "noul": 0.1},
           "lang": {"type": "choice", "choice": "en", "probabilities": {"en": 0.9, "fr": 0.1}, "confidence": 0.8},
           "tone": {"type": "score", "score": 1.5, "legend": {"0": "casual", "1": "neutral", "2": "formal"},
                    "probabilities": {"0": 0.1, "1": 0.4, "2": 0.5}, "confidence": 0.7}}
GOOD = {"model": "jev-9", "answers": ANSWERS, "usage": {"input_tokens": 12, "output_tokens": 3}}


def ok(body=GOOD, status=200, retry_after=None):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return ClassifierResponse(status, raw, retry_after)


class Scripted:
    """A synchronous classifier transport that replays canned responses and records every attempt."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []
        self.threads = []

    def post(self, url, headers, body, timeout):
        self.calls.append((url, dict(headers), body, timeout))
        self.threads.append(threading.current_thread().name)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply


@pytest.fixture(autouse=True)
def _no_key(monkeypatch):
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)


def make(*replies, **kw):
    transport = Scripted(*replies)
    kw.setdefault("retry_base_ms", 1)
    kw.setdefault("base_url", URL)
    return create_classifier(http_transport=transport, **kw), transport


# -- the request --------------------------------------------------------------------------------------------


async def test_body_is_canonical_json_with_request_params_merged_then_transformed():
    c, t = make(ok(), ok(), request_params={"model": "jev-override", "temperature": 0})
    d = await c.evaluate({"text": "Salut", "n": 1}, QS)
    url, headers, body, timeout = t.calls[0]
    assert url == "https://clf.example/v1/systemone" and timeout == 10.0
    assert body == canonical_json({"model": "jev-override", "questions": questions_wire(QS),
                                   "state": {"n": 1, "text": "Salut"}, "temperature": 0})
    assert body.startswith(b'{"model":"jev-override","questions":{"lang":{"criteria":{"en":"English"')
    assert d.model == "jev-9" and d.noul("toxic").noul == 0.1 and d.choice("lang").near_uniform is False

    def transform(b):
        b["extra"] = "in place"
        return {"replaced": True, **b}

    c, t = make(ok(), base_url=URL + "/", body_transform=transform)
    await c.evaluate({}, QS)
    assert t.calls[0][0] == "https://clf.example/v1/systemone"
    assert json.loads(t.calls[0][2])["replaced"] is True and json.loads(t.calls[0][2])["extra"] == "in place"


async def test_headers_are_rebuilt_per_attempt_with_the_key_and_expanded_variables(monkeypatch):
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-key-1")
    monkeypatch.setenv("TENANT", "acme")
    monkeypatch.delenv("UNSET_VAR", raising=False)

    def on_error(info):
        monkeypatch.setenv("TENANT", "acme-2")
        return "retry"

    c, t = make(ok(status=503), ok(), headers={"X-Tenant": "${TENANT}", "X-Missing": "a${UNSET_VAR}b"},
                on_error=on_error)
    await c.evaluate({}, QS)
    first, second = t.calls[0][1], t.calls[1][1]
    assert list(first.items()) == [("Content-Type", "application/json"), ("Authorization", "Bearer ts-key-1"),
                                   ("X-Tenant", "acme"), ("X-Missing", "ab")]
    assert second["X-Tenant"] == "acme-2"
    monkeypatch.setenv("TYPESAFE_API_KEY", "")
    c, t = make(ok())
    await c.evaluate({}, QS)
    assert "Authorization" not in t.calls[0][1]


async def test_a_sync_transport_runs_off_the_event_loop_and_an_async_one_is_awaited():
    c, t = make(ok())
    await c.evaluate({}, QS)
    assert t.threads[0] != threading.current_thread().name and t.threads[0].startswith("toolnexus-transport")

    class AsyncTransport:
        def __init__(self):
            self.loop_thread = None

        async def post(self, url, headers, body, timeout):
            self.loop_thread = threading.current_thread().name
            await asyncio.sleep(0)
            return ok()

    a = AsyncTransport()
    c = create_classifier(base_url=URL, http_transport=a)
    assert (await c.evaluate({}, QS)).model == "jev-9"
    assert a.loop_thread == threading.current_thread().name


async def test_default_urllib_transport_against_a_loopback_server(monkeypatch):
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-loop")
    with LlmServer() as server:
        server.add(Json(GOOD))
        c = create_classifier(base_url=server.base_url + "/v1")
        d = await c.evaluate({"text": "é"}, QS)
        req = server.requests[0]
    assert req.method == "POST" and req.path == "/v1/systemone"
    assert req.body == canonical_json({"model": "jev-latest", "questions": questions_wire(QS), "state": {"text": "é"}})
    assert req.headers["authorization"] == "Bearer ts-loop" and req.headers["content-type"] == "application/json"
    assert d.usage.input_tokens == 12 and d.usage.cost is None


# -- retries ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 529])
async def test_retryable_statuses_are_retried(status):
    c, t = make(ok(b"busy", status=status), ok())
    assert (await c.evaluate({}, QS)).model == "jev-9" and len(t.calls) == 2


async def test_default_budget_is_two_retries_then_the_pinned_error():
    c, t = make(*[ok(b"down for maintenance", status=500)] * 3)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: HTTP 500: down for maintenance"
    assert len(t.calls) == 3


async def test_non_retryable_status_fails_at_once_and_extra_statuses_are_additive():
    c, t = make(ok(b"bad request", status=400))
    with pytest.raises(ClassifierError, match="HTTP 400: bad request$"):
        await c.evaluate({}, QS)
    assert len(t.calls) == 1
    c, t = make(ok(b"teapot", status=418), ok(), retryable_statuses=[418])
    await c.evaluate({}, QS)
    assert len(t.calls) == 2


async def test_on_error_sees_each_failure_and_decides():
    seen = []

    def on_error(info):
        seen.append(dict(info, error=type(info["error"]).__name__ if info["error"] else None))
        return "retry" if len(seen) == 1 else "fail"

    c, t = make(ConnectionRefusedError("refused"), ok(b"x", status=400), ok(), on_error=on_error)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert seen == [{"error": "ConnectionRefusedError", "status": 0, "attempt": 0, "retryable": True},
                    {"error": None, "status": 400, "attempt": 1, "retryable": False}]
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: HTTP 400: x" and len(t.calls) == 2


async def test_transport_fault_message_and_retry_after_is_honoured():
    c, t = make(OSError("network down"), OSError("network down"), OSError("network down"))
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: OSError: network down"
    c, t = make(ok(b"slow down", status=429, retry_after="0"), ok(), retry_base_ms=60_000)
    assert (await c.evaluate({}, QS)).model == "jev-9"  # Retry-After 0 wins over a one-minute backoff


async def test_error_bodies_are_redacted_capped_and_dropped_for_auth_failures(monkeypatch):
    monkeypatch.setenv("TYPESAFE_API_KEY", "ts-secret-key")
    monkeypatch.setenv("TENANT_TOKEN", "tenant-secret")
    body = json.dumps({"error": "quota", "user_id": "u-123", "echo": "ts-secret-key tenant-secret"}) + "x" * 300
    events = []
    c, t = make(ok(body.encode(), status=400), headers={"X-Token": "${TENANT_TOKEN}"}, on_metric=events.append)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    message = str(e.value)
    assert "u-123" not in message and "«redacted»" in message and message.endswith("…")
    assert "ts-secret-key" not in message and "tenant-secret" not in message
    assert "ts-secret-key" not in json.dumps(events) and "tenant-secret" not in json.dumps(events)
    c, t = make(ok(b"invalid key ts-secret-key", status=401))
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: HTTP 401"
    c, t = make(OSError("refused while sending ts-secret-key"), ok(b"", status=400))
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: HTTP 400"


# -- decoding --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body,message", [
    (b"<html>", "classifier: unparseable response: Expecting value: line 1 column 1 (char 0)"),
    (b"[1, 2]", "classifier: response is not a JSON object"),
    (json.dumps({"answers": {"toxic": 3}}).encode(), "classifier: answer 'toxic' is not a JSON object"),
    (json.dumps({"answers": {"toxic": {"type": "vote"}}}).encode(), "classifier: answer 'toxic': unknown type 'vote'"),
    (json.dumps({"answers": {"toxic": {"type": "noul"}}}).encode(),
     "classifier: answer 'toxic': malformed noul answer: 'noul'"),
    (json.dumps({"answers": {"toxic": {"type": "noul", "noul": "high"}}}).encode(),
     "classifier: answer 'toxic': malformed noul answer: could not convert string to float: 'high'"),
])
async def test_decode_errors_are_pinned(body, message):
    c, _ = make(ok(body))
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, {"toxic": QS["toxic"]})
    assert str(e.value) == message


async def test_decode_defaults_and_derived_fields():
    answers = {"lang": {"type": "choice", "choice": "en", "probabilities": {"en": 0.5, "fr": 0.5}},
               "tone": {"type": "score", "score": 2}}
    c, _ = make(ok({"answers": answers, "calibrated": None}), ok({"answers": answers, "calibrated": 0,
                                                                   "usage": {"input_tokens": 5, "cost": 0}}))
    qs = {"lang": QS["lang"], "tone": QS["tone"]}
    d = await c.evaluate({}, qs)
    assert (
        d.model == ""
        and d.calibrated is True
        and d.usage.cost is None
        and (d.usage.input_tokens, d.usage.output_tokens) == (0, 0)
    )
    lang = d.choice("lang")
    assert lang.confidence == 0.0 and lang.near_uniform is True
    assert d.score("tone").legend == {} and d.score("tone").probabilities == {} and d.score("tone").score == 2.0
    d = await c.evaluate({}, qs)
    assert d.calibrated is False and d.usage.cost == 0.0 and d.usage.input_tokens == 5


# -- beyond 0.21 ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answers,message",
    [
        (
            {k: v for k, v in ANSWERS.items() if k != "tone"},
            "classifier: question 'tone' has no answer in the response",
        ),
        (
            {**ANSWERS, "extra": {"type": "noul", "noul": 0.5}},
            "classifier: answer 'extra' answers no question that was asked",
        ),
        (
            {**ANSWERS, "toxic": {"type": "choice", "choice": "en", "probabilities": {}, "confidence": 1}},
            "classifier: answer 'toxic' is a choice answer, but 'toxic' is a noul question",
        ),
        (
            {**ANSWERS, "lang": {"type": "choice", "choice": "de", "probabilities": {"de": 1.0}, "confidence": 0.9}},
            "classifier: answer 'lang': choice 'de' is not an offered option ('en', 'fr')",
        ),
        ({**ANSWERS, "toxic": {"type": "noul", "noul": 1.4}}, "classifier: answer 'toxic': noul 1.4 is outside 0..1"),
        (
            {**ANSWERS, "tone": {"type": "score", "score": 3, "confidence": 0.9}},
            "classifier: answer 'tone': score 3.0 is outside the rubric 0..2",
        ),
    ],
)
async def test_strict_answers_are_checked_against_the_questions_at_evaluate(answers, message):
    """With strict=True, answers are validated against the questions on decode (missing or extra keys, a wrong
    type, a choice that was not offered, a noul outside 0..1, a score off the rubric): a ClassifierError naming
    the key, from evaluate."""
    c, _ = make(ok({"answers": answers}), strict=True)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == message


@pytest.mark.parametrize("answers,message", [
    ({k: v for k, v in ANSWERS.items() if k != "tone"}, "classifier: no answer 'tone' in this decision"),
    ({**ANSWERS, "toxic": {"type": "choice", "choice": "en", "probabilities": {}, "confidence": 1}},
     "classifier: answer 'toxic' is a choice answer, but 'toxic' is a noul question"),
    ({**ANSWERS, "lang": {"type": "choice", "choice": "de", "probabilities": {"de": 1.0}, "confidence": 0.9}},
     "classifier: answer 'lang': choice 'de' is not an offered option ('en', 'fr')"),
    ({**ANSWERS, "toxic": {"type": "noul", "noul": 1.4}}, "classifier: answer 'toxic': noul 1.4 is outside 0..1"),
    ({**ANSWERS, "tone": {"type": "score", "score": 3, "confidence": 0.9}},
     "classifier: answer 'tone': score 3.0 is outside the rubric 0..2"),
])
async def test_by_default_a_missing_or_unusable_answer_fails_only_where_it_is_read(answers, message):
    """0.21's behaviour, kept: evaluate returns the decision; the answers that fit stay readable, and reading
    the one that is missing or does not fit its question raises, naming it. An unusable answer is never in
    `answers` (a router can still never be handed an option it did not offer)."""
    c, _ = make(ok({"answers": answers}))
    d = await c.evaluate({}, QS)
    key = message.split("'")[1]
    readers = {"toxic": d.noul, "lang": d.choice, "tone": d.score}
    with pytest.raises(ClassifierError) as e:
        readers[key](key)
    assert str(e.value) == message and key not in d.answers
    for other, read in readers.items():
        if other != key:
            assert read(other) is d.answers[other]


async def test_an_answer_to_a_question_not_asked_is_kept_out_of_the_decision():
    c, _ = make(ok({"answers": {**ANSWERS, "extra": {"type": "noul", "noul": 0.5}}}))
    d = await c.evaluate({}, QS)
    assert "extra" not in d.answers and set(d.answers) == set(QS)
    with pytest.raises(ClassifierError, match="^classifier: answer 'extra' answers no question that was asked$"):
        d.noul("extra")


@pytest.mark.parametrize("response,message", [
    ({"answers": "x"}, "classifier: response answers is not a JSON object (got str)"),
    ({"answers": ANSWERS, "usage": [1]}, "classifier: response usage is not a JSON object (got list)"),
    ({"answers": ANSWERS, "usage": {"input_tokens": "abc"}},
     "classifier: response usage: input_tokens must be a number, got 'abc'"),
])
async def test_raw_exceptions_never_escape_evaluate(response, message):
    """Raw exceptions no longer escape evaluate ("answers": "x", "usage": [1], input_tokens "abc"): always a
    ClassifierError plus exactly one error event."""
    events = []
    c, _ = make(ok(response), on_metric=events.append)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == message
    assert [ev["status"] for ev in events] == ["error"] and events[0]["error"] == message


async def test_custom_none_non_json_state_and_a_raising_sink_are_contained(caplog):
    """A custom evaluate returning None or raising, a state that is not JSON, and an on_metric that raises are all
    contained: ClassifierError with one error event, and a broken sink never fails the decision."""
    events = []
    c = create_classifier(style="custom", evaluate=lambda s, q: None, on_metric=events.append)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, QS)
    assert str(e.value) == "classifier: custom evaluate returned NoneType, not a Decision"

    def boom(state, qs):
        raise KeyError("lost")

    c = create_classifier(style="custom", evaluate=boom, on_metric=events.append)
    with pytest.raises(ClassifierError, match="^classifier: custom evaluate raised KeyError: 'lost'$") as e:
        await c.evaluate({}, QS)
    assert isinstance(e.value.__cause__, KeyError)
    sent = Scripted(ok())
    c = create_classifier(base_url=URL, http_transport=sent, on_metric=events.append)
    with pytest.raises(ClassifierError, match="not JSON-serialisable"):
        await c.evaluate({"when": object()}, QS)
    assert sent.calls == []
    assert [ev["status"] for ev in events] == ["error", "error", "error"]

    def broken_sink(event):
        raise RuntimeError("sink down")

    c, _ = make(ok(), on_metric=broken_sink)
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        assert (await c.evaluate({}, QS)).model == "jev-9"
    assert any("classifier on_metric raised RuntimeError: sink down" in r.getMessage() for r in caplog.records)


async def test_retries_zero_is_one_attempt_and_none_is_the_default():
    """retries=0 now means exactly one attempt (0.21 made three); None means the default of two retries."""
    c, t = make(*[ok(b"down", status=503)] * 3, retries=0)
    with pytest.raises(ClassifierError):
        await c.evaluate({}, QS)
    assert len(t.calls) == 1
    c, t = make(*[ok(b"down", status=503)] * 3, retries=None)
    with pytest.raises(ClassifierError):
        await c.evaluate({}, QS)
    assert len(t.calls) == 3
    with pytest.raises(ClassifierError, match="retries must be None or an int >= 0"):
        create_classifier(retries=-1)


async def test_retry_after_is_capped_and_a_total_deadline_bounds_the_call():
    """A huge Retry-After is capped (max_retry_delay, 30 s by default) instead of honoured for decades, and a
    total deadline bounds the whole call, however the transport behaves."""
    c, t = make(ok(b"later", status=503, retry_after="2147483647"), ok(), max_retry_delay=0.01)
    assert (await c.evaluate({}, QS)).model == "jev-9" and len(t.calls) == 2

    released = threading.Event()

    class Hanging:
        def post(self, url, headers, body, timeout):
            released.wait(10)  # ignores its timeout, like a stuck socket
            return ok()

    c = create_classifier(base_url=URL, http_transport=Hanging(), deadline=0.2, timeout=30)
    try:
        with pytest.raises(ClassifierError) as e:
            await c.evaluate({}, QS)
    finally:
        released.set()
    assert str(e.value) == "classifier: POST https://clf.example/v1/systemone: deadline of 0.2s exceeded"
    c, t = make(ok(b"later", status=503, retry_after="60"), ok(), deadline=5)
    with pytest.raises(ClassifierError, match="no time left for a retry within the deadline of 5s"):
        await c.evaluate({}, QS)
    assert len(t.calls) == 1


async def test_llm_style_timeout_model_ignored_options_and_stray_braces(caplog):
    """The llm style now enforces the classifier's timeout, reports the client's model instead of jev-latest, warns
    about the options it cannot apply, and finds the first JSON object with answers despite stray braces."""
    release = threading.Event()
    replies = ['Sure {not json} here: {"note": 1} {"answers": ' + json.dumps({"toxic": {"type": "noul", "noul": 0.2}})
               + '} {trailing}', "late"]

    def generate(request):
        if len(replies) == 1:
            release.wait(10)
        return {"content": replies.pop(0)}

    client = create_in_process_client(model="gpt-small", generate=generate)
    with caplog.at_level(logging.WARNING, logger="toolnexus"):
        c = create_classifier(style="llm", client=client, headers={"X": "1"}, retries=5, timeout=0.3)
    assert ("[toolnexus] classifier: style 'llm' ignores headers, retries — the client's own settings apply to its run"
            in [r.getMessage() for r in caplog.records])
    events = []
    c.on_metric = events.append
    d = await c.evaluate({"text": "x"}, {"toxic": QS["toxic"]})
    assert d.model == "gpt-small" and d.noul("toxic").noul == 0.2 and events[0]["model"] == "gpt-small"
    try:
        with pytest.raises(ClassifierError) as e:
            await c.evaluate({"text": "y"}, {"toxic": QS["toxic"]})
    finally:
        release.set()
    assert str(e.value) == "classifier: llm: no reply within the classifier timeout of 0.3s"
    assert events[-1]["status"] == "error" and events[-1]["model"] == "gpt-small"


async def test_evaluate_batch_stops_scheduling_after_the_first_failure():
    """evaluate_batch no longer evaluates every state after one fails: with concurrency=1 and state 0 failing,
    state 1 is never sent."""
    c, t = make(ok(b"nope", status=400), ok(), ok())
    with pytest.raises(ClassifierError) as e:
        await c.evaluate_batch([{"i": 0}, {"i": 1}, {"i": 2}], QS, concurrency=1)
    assert (
        str(e.value)
        == "classifier: evaluate_batch: state 0: classifier: POST https://clf.example/v1/systemone: HTTP 400: nope"
    )
    assert len(t.calls) == 1


async def test_a_router_can_never_be_handed_a_model_it_did_not_offer():
    returned = Decision("m", {"model": ChoiceAnswer("gpt-9", {}, 0.99)})
    asked = {"model": ChoiceQuestion("Which model?", {"small": "cheap", "large": "smart"})}
    strict = create_classifier(style="custom", evaluate=lambda s, q: returned, strict=True)
    with pytest.raises(ClassifierError, match="choice 'gpt-9' is not an offered option"):
        await strict.evaluate({}, asked)
    lazy = await create_classifier(style="custom", evaluate=lambda s, q: returned).evaluate({}, asked)
    assert lazy.answers == {} and "model" in returned.answers  # the caller's own Decision is left as it was
    with pytest.raises(ClassifierError, match="choice 'gpt-9' is not an offered option"):
        lazy.choice("model")
    assert NoulAnswer(0.5) == NoulAnswer(0.5)
