"""toolnexus.classifier: surface, construction, wire forms, decoding, styles, metrics, batches."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

import toolnexus
from toolnexus import classifier as clf_mod
from toolnexus.classifier import (
    CLASSIFIER_BACKENDS,
    ChoiceAnswer,
    ChoiceQuestion,
    Classifier,
    ClassifierError,
    ClassifierUsage,
    Decision,
    NoulAnswer,
    NoulCriteria,
    NoulQuestion,
    RecordedDecision,
    ScoreAnswer,
    ScoreQuestion,
    canonical_json,
    canonical_request,
    choice_over,
    create_classifier,
    near_uniform,
    question_wire,
    questions_wire,
)
from toolnexus.client import create_in_process_client
from toolnexus.errors import ToolnexusError

QS = {"toxic": NoulQuestion("Is `text` toxic?"),
      "lang": ChoiceQuestion("Which language is `text`?", {"en": "English", "fr": "French"}),
      "tone": ScoreQuestion("How formal is `text`?", ["casual", "neutral", "formal"])}
GOOD = {"model": "jev-9", "answers": {
    "toxic": {"type": "noul", "noul": 0.1},
    "lang": {"type": "choice", "choice": "en", "probabilities": {"en": 0.9, "fr": 0.1}, "confidence": 0.8},
    "tone": {"type": "score", "score": 1.5, "legend": {"0": "casual", "1": "neutral", "2": "formal"},
             "probabilities": {"0": 0.1, "1": 0.4, "2": 0.5}, "confidence": 0.7}},
    "usage": {"input_tokens": 12, "output_tokens": 3, "cost": 0.002}, "calibrated": True}


def custom(answers, model="m", **kw):
    def evaluate(state, questions):
        return Decision(model, answers)

    return create_classifier(style="custom", evaluate=evaluate, **kw)


# -- surface ----------------------------------------------------------------------------------------------


def test_public_names_import_from_toolnexus_and_module_level_names_stay_in_the_module():
    top = ["ClassifierStyle", "ClassifierError", "NoulCriteria", "NoulQuestion", "ChoiceQuestion", "ScoreQuestion",
           "Question", "NoulAnswer", "ChoiceAnswer", "ScoreAnswer", "DecisionAnswer", "ClassifierUsage", "Decision",
           "RecordedDecision", "ClassifierResponse", "ClassifierTransport", "choice_over", "question_wire",
           "questions_wire", "canonical_json", "canonical_request", "near_uniform", "create_classifier", "Classifier"]
    for name in top:
        assert (
            name in clf_mod.__all__ and name in toolnexus.__all__ and getattr(toolnexus, name) is getattr(clf_mod, name)
        )
    for name in (
        "DEFAULT_CLASSIFIER_BASE_URL",
        "CLASSIFIER_BACKENDS",
        "ClassifierBackend",
        "METRIC_CLASSIFIER_EVALUATE",
    ):
        assert name in clf_mod.__all__ and name not in toolnexus.__all__
    assert issubclass(ClassifierError, ToolnexusError)


def test_pinned_constants():
    assert (
        clf_mod.DEFAULT_CLASSIFIER_BASE_URL,
        clf_mod.DEFAULT_CLASSIFIER_MODEL,
        clf_mod.DEFAULT_CLASSIFIER_API_KEY_ENV,
        clf_mod.DEFAULT_CLASSIFIER_TIMEOUT,
    ) == ("https://api.typesafe.ai/v1", "jev-latest", "TYPESAFE_API_KEY", 10.0)
    assert (clf_mod.MAX_CHOICE_OPTIONS, clf_mod.MIN_SCORE_LEVELS, clf_mod.MAX_SCORE_LEVELS,
            clf_mod.NEAR_UNIFORM_TOLERANCE) == (255, 2, 10, 0.05)
    assert (clf_mod.METRIC_CLASSIFIER_EVALUATE, clf_mod.METRIC_CLASSIFIER_WARNING) == ("classifier.evaluate",
                                                                                       "classifier.warning")
    assert CLASSIFIER_BACKENDS == {
        "typesafe": {
            "base_url": "https://api.typesafe.ai/v1",
            "model": "jev-latest",
            "api_key_env": "TYPESAFE_API_KEY",
        },
        "openrouter": {
            "base_url": "https://openrouter.ai/api/v1",
            "model": "typesafe/jev-1.13",
            "api_key_env": "OPENROUTER_API_KEY",
        },
    }


def test_models_are_dataclasses_with_the_pinned_field_order():
    def names(cls):
        return [f.name for f in dataclasses.fields(cls)]

    assert names(NoulCriteria) == ["true", "false"]
    assert names(NoulQuestion) == ["instructions", "criteria", "type"]
    assert names(ChoiceQuestion) == ["instructions", "criteria", "type"]
    assert names(ScoreQuestion) == ["instructions", "criteria", "type"]
    assert names(NoulAnswer) == ["noul", "type"]
    assert names(ChoiceAnswer) == ["choice", "probabilities", "confidence", "near_uniform", "type"]
    assert names(ScoreAnswer) == ["score", "legend", "probabilities", "confidence", "type"]
    assert names(ClassifierUsage) == ["input_tokens", "output_tokens", "cost"]
    assert names(Decision) == ["model", "answers", "usage", "calibrated", "unanswered"]  # the last one is additive
    assert names(RecordedDecision) == ["state", "questions", "response"]
    assert Decision() == Decision("", {}, ClassifierUsage(0, 0, None), True)
    assert choice_over("Pick", {"a": "A"}) == ChoiceQuestion("Pick", {"a": "A"})


def test_score_levels_order_by_key_length_then_key():
    legend = {str(i): f"L{i}" for i in (10, 2, 0, 1)}
    assert ScoreAnswer(1, legend, {}, 0.5).levels() == ["L0", "L1", "L2", "L10"]


def test_typed_reads():
    d = Decision("m", {"a": NoulAnswer(0.2), "b": ChoiceAnswer("x", {"x": 1.0}, 0.9)})
    assert d.noul("a").noul == 0.2 and d.choice("b").choice == "x"
    with pytest.raises(ClassifierError) as e:
        d.score("zz")
    assert str(e.value) == "classifier: no answer 'zz' in this decision"
    with pytest.raises(ClassifierError) as e:
        d.score("a")
    assert str(e.value) == "classifier: answer 'a' is a noul answer, not score"


# -- construction ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs,message", [
    ({"style": "fast"}, "classifier: unknown style 'fast'"),
    ({"backend": "acme"}, "classifier: unknown backend 'acme' (known: openrouter, typesafe)"),
    ({"base_url": "https://openrouter.ai/api/v1"},
     'classifier: model "jev-latest" is TypeSafe\'s spelling; on openrouter.ai use "typesafe/jev-1.13"'),
    ({"style": "llm"}, "classifier: style 'llm' requires client"),
    ({"style": "custom"}, "classifier: style 'custom' requires evaluate"),
    ({"style": "static", "decisions": [("s", {"q": "not a question"}, {})]},
     "classifier: recorded decision 0: classifier: question 'q' is not a noul, choice or score question"),
    ({"style": "static", "decisions": [RecordedDecision({"a": {1, 2}}, QS, {})]},
     "classifier: recorded decision 0: classifier: the request is not JSON-serialisable — check the state: "
     "Object of type set is not JSON serializable"),
])
def test_construction_errors_come_before_any_io(kwargs, message):
    with pytest.raises(ClassifierError) as e:
        create_classifier(**kwargs)
    assert str(e.value) == message


def test_backend_fills_only_falsy_fields_and_defaults_apply():
    c = create_classifier(backend="openrouter")
    assert (c.base_url, c.model, c.api_key_env, c.timeout) == ("https://openrouter.ai/api/v1", "typesafe/jev-1.13",
                                                               "OPENROUTER_API_KEY", 10.0)
    c = create_classifier(backend="openrouter", model="typesafe/jev-2", timeout=0)
    assert c.model == "typesafe/jev-2" and c.timeout == 10.0
    c = create_classifier()
    assert (c.style, c.base_url, c.model, c.api_key_env) == ("systemone", "https://api.typesafe.ai/v1", "jev-latest",
                                                             "TYPESAFE_API_KEY")
    fn = lambda s, q: Decision()  # noqa: E731
    assert create_classifier(style="custom", evaluate=fn).evaluate_fn is fn
    assert "secret" not in repr(create_classifier(headers={"X-Key": "secret"}))


def test_classifier_init_takes_the_same_keywords_minus_backend_with_concrete_defaults():
    import inspect

    create = inspect.signature(create_classifier).parameters
    init = inspect.signature(Classifier.__init__).parameters
    assert [p for p in create if p != "backend"] == [p for p in init if p != "self"]
    c = Classifier()
    assert (c.base_url, c.model, c.timeout, c.retries) == ("https://api.typesafe.ai/v1", "jev-latest", 10.0, 2)


# -- wire forms ---------------------------------------------------------------------------------------------


def test_question_projections():
    assert question_wire(NoulQuestion("i")) == {"type": "noul", "instructions": "i"}
    assert question_wire(NoulQuestion("i", NoulCriteria())) == {"type": "noul", "instructions": "i",
                                                               "criteria": {"true": "", "false": ""}}
    assert question_wire(ChoiceQuestion("c", {"b": "B", "a": "A"})) == {"type": "choice", "instructions": "c",
                                                                       "criteria": {"b": "B", "a": "A"}}
    assert question_wire(ScoreQuestion("s", ["z", "a", "m"]))["criteria"] == ["z", "a", "m"]  # never reordered
    with pytest.raises(ClassifierError) as e:
        questions_wire({"bad": {"type": "noul"}})
    assert str(e.value) == "classifier: question 'bad' is not a noul, choice or score question"


def test_canonical_json_and_request_bytes():
    assert (
        canonical_json({"b": 1, "a": ["é", {"d": None, "c": True}]}) == '{"a":["é",{"c":true,"d":null}],"b":1}'.encode()
    )
    assert canonical_request("m", {"q": NoulQuestion("Is it?")}) == (
        b'{"model":"m","questions":{"q":{"instructions":"Is it?","type":"noul"}}}')


@pytest.mark.parametrize("p,expected", [
    ({}, False), ({"a": 0.2}, True), ({"a": 0.5, "b": 0.5}, True), ({"a": 0.54, "b": 0.46}, True),
    ({"a": 0.56, "b": 0.44}, False), ({"a": 0.32, "b": 0.32, "c": 0.36}, True), ({"a": 0, "b": 0, "c": 1}, False)])
def test_near_uniform(p, expected):
    assert near_uniform(p) is expected


# -- evaluate: checks before anything is sent -------------------------------------------------------------------


@pytest.mark.parametrize("questions,message", [
    ({}, "classifier: no questions to evaluate"),
    ({"b": ChoiceQuestion("x", {}), "a": ScoreQuestion("y", ["one"])},
     "classifier: question 'a': a score needs 2..10 ordered levels, got 1"),
    ({"c": ChoiceQuestion("x", {str(i): str(i) for i in range(256)})},
     "classifier: question 'c': a choice needs 1..255 options, got 256"),
    ({"s": ScoreQuestion("x", [str(i) for i in range(11)])},
     "classifier: question 's': a score needs 2..10 ordered levels, got 11"),
])
async def test_question_count_errors_emit_an_error_event_and_send_nothing(questions, message):
    calls, events = [], []

    def evaluate(state, qs):
        calls.append(qs)
        return Decision()

    c = create_classifier(style="custom", evaluate=evaluate, on_metric=events.append)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, questions)
    assert str(e.value) == message and calls == []
    assert len(events) == 1
    assert events[0]["event"] == "classifier.evaluate" and events[0]["status"] == "error"
    assert events[0]["error"] == message and events[0]["model"] == "jev-latest" and isinstance(events[0]["ms"], int)


@pytest.mark.parametrize("criteria,reason", [
    ({"a": "", "b": " "}, "every description is empty"),
    ({"yes": "yes", "no": "no"}, "every description is just its own option id"),
    ({"a": "same", "b": "same"}, "every description is identical"),
])
async def test_degenerate_choice_criteria_warn_once_per_key_per_classifier(criteria, reason):
    events = []
    q = {"pick": ChoiceQuestion("Pick", criteria)}
    answer = {"pick": ChoiceAnswer(next(iter(criteria)), {}, 0.9)}
    c = custom(answer, on_metric=events.append)
    await c.evaluate({}, q)
    await c.evaluate({}, q)
    warnings = [e for e in events if e["event"] == "classifier.warning"]
    assert warnings == [{"event": "classifier.warning", "question": "pick", "warning":
                         f"classifier: question 'pick' has degenerate criteria ({reason}) — every option reads the "
                         "same to the model and the answer ranks at chance; describe what picking each option would "
                         "MEAN (SPEC.md §8B)"}]
    other = custom(answer, on_metric=events.append)
    await other.evaluate({}, q)
    assert len([e for e in events if e["event"] == "classifier.warning"]) == 2


async def test_ok_event_shape():
    events = []
    d = Decision("jev-9", {"toxic": NoulAnswer(0.3)}, ClassifierUsage(7, 2))
    c = create_classifier(style="custom", evaluate=lambda s, q: d, on_metric=events.append)
    assert await c.evaluate({}, {"toxic": QS["toxic"]}) is d
    assert list(events[0]) == ["event", "model", "status", "ms", "prompt_tokens", "completion_tokens"]
    assert events[0] | {"ms": 0} == {"event": "classifier.evaluate", "model": "jev-9", "status": "ok", "ms": 0,
                                     "prompt_tokens": 7, "completion_tokens": 2}


# -- styles --------------------------------------------------------------------------------------------------


async def test_custom_style_sync_and_async_used_as_is():
    d = Decision("m", {"toxic": NoulAnswer(0.5)})
    seen = []

    async def evaluate(state, questions):
        seen.append((state, questions))
        return d

    c = create_classifier(style="custom", evaluate=evaluate)
    st = {"text": "x"}
    assert await c.evaluate(st, {"toxic": QS["toxic"]}) is d
    assert seen[0][0] is st


async def test_static_style_replays_recordings_keyed_on_request_and_state():
    records = [RecordedDecision({"text": "hi"}, QS, GOOD),
               ({"text": "bytes"}, QS, json.dumps(GOOD).encode()),
               {"state": {"text": "str"}, "questions": QS, "response": json.dumps(GOOD)}]
    c = create_classifier(style="static", decisions=records)
    for text in ("hi", "bytes", "str"):
        d = await c.evaluate({"text": text}, QS)
        assert d.choice("lang").choice == "en" and d.usage == ClassifierUsage(12, 3, 0.002)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({"text": "other"}, QS)
    assert str(e.value) == "classifier: static: no recorded decision for this request+state"
    with pytest.raises(ClassifierError, match="no recorded decision"):  # the questions are part of the key
        await c.evaluate({"text": "hi"}, {**QS, "tone": ScoreQuestion("How formal?", ["a", "b"])})


def scripted_llm(*replies, model="gpt-tiny", usage=None):
    prompts = []
    queue = list(replies)

    def generate(request):
        prompts.append(request["messages"][-1]["content"])
        return {"content": queue.pop(0), "usage": usage or {"prompt_tokens": 40, "completion_tokens": 9}}

    return create_in_process_client(model=model, generate=generate), prompts


async def test_llm_style_sends_the_pinned_prompt_and_reads_the_reply():
    reply = json.dumps({"answers": GOOD["answers"]})
    client, prompts = scripted_llm(reply)
    c = create_classifier(style="llm", client=client)
    d = await c.evaluate({"text": "Bonjour"}, QS)
    expected = (
        "Answer every question about the state below. Questions are INDEPENDENT: one answer is never context for "
        "another.\n\nSTATE:\n" + canonical_json({"text": "Bonjour"}).decode() + "\n\nQUESTIONS:\n"
        + canonical_json(questions_wire(QS)).decode() + "\n\nReply with JSON only, no prose and no code fence, shaped "
        'exactly:\n{"answers":{"<key>":{"type":"noul","noul":0.0}}}\nA "noul" answer is {"type":"noul","noul":<0..1>}. '
        'A "choice" answer is {"type":"choice","choice":"<one offered option id>","probabilities":{"<every offered '
        'option id>":<0..1>},"confidence":<0..1>}. A "score" answer is {"type":"score","score":<a number within the '
        'rubric bounds, fractional allowed>,"legend":{"0":"<level 0>",…},"probabilities":{"0":<0..1>,…},'
        '"confidence":<0..1>}.')
    assert prompts == [expected]
    assert d.calibrated is False and d.usage == ClassifierUsage(40, 9) and d.choice("lang").choice == "en"


async def test_llm_style_reply_errors():
    client, _ = scripted_llm("no json here", "{not json at all")
    c = create_classifier(style="llm", client=client)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, {"toxic": QS["toxic"]})
    assert str(e.value) == "classifier: llm: no JSON object in the reply"
    with pytest.raises(ClassifierError) as e:
        await c.evaluate({}, {"toxic": QS["toxic"]})
    assert str(e.value).startswith("classifier: llm: Expecting property name enclosed in double quotes")


# -- batches ---------------------------------------------------------------------------------------------------


async def test_evaluate_batch_keeps_state_order_and_bounds_concurrency():
    in_flight, peak = 0, 0
    release = asyncio.Event()

    async def evaluate(state, questions):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            release.set()
        await release.wait()
        in_flight -= 1
        return Decision(f"m{state['i']}", {"toxic": NoulAnswer(state["i"] / 10)})

    c = create_classifier(style="custom", evaluate=evaluate)
    out = await c.evaluate_batch([{"i": i} for i in range(8)], {"toxic": QS["toxic"]}, concurrency=3)
    assert [d.model for d in out] == [f"m{i}" for i in range(8)] and peak == 3
    with pytest.raises(ClassifierError) as e:
        await c.evaluate_batch([], {"toxic": QS["toxic"]})
    assert str(e.value) == "classifier: evaluate_batch: no states to evaluate"


async def test_evaluate_batch_names_the_lowest_failing_state_and_returns_nothing():
    started = asyncio.Event()

    async def evaluate(state, questions):
        if state == 2:
            await started.wait()
            raise ClassifierError("classifier: boom 2")
        if state == 1:
            started.set()
            raise ClassifierError("classifier: boom 1")
        return Decision("m", {"toxic": NoulAnswer(0.1)})

    c = create_classifier(style="custom", evaluate=evaluate)
    with pytest.raises(ClassifierError) as e:
        await c.evaluate_batch([0, 1, 2, 3], {"toxic": QS["toxic"]}, concurrency=0)  # max(1, 0): one at a time
    assert str(e.value) == "classifier: evaluate_batch: state 1: classifier: boom 1"
