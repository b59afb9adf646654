"""toolnexus.judge: builders, bands, reading, rule gates, escalation, wire helpers and tapes."""

from __future__ import annotations

import dataclasses
import json

import pytest

import toolnexus
from toolnexus import judge
from toolnexus.classifier import (
    ChoiceAnswer,
    ChoiceQuestion,
    ClassifierError,
    Decision,
    NoulAnswer,
    NoulCriteria,
    NoulQuestion,
    ScoreAnswer,
    ScoreQuestion,
    create_classifier,
)
from toolnexus.judge import (
    DEFAULT_BANDS,
    Bands,
    JudgeAnswer,
    Outcome,
    Policy,
    Rule,
    Tape,
    ask,
    choice,
    context,
    decide,
    decision_wire,
    gate,
    noul,
    question_from_wire,
    questions,
    read,
    score,
    state,
    static_classifier,
)
from toolnexus.types import Request


def fixed(answers, model="m", calibrated=True):
    seen = []

    def evaluate(st, qs):
        seen.append((st, qs))
        return Decision(model, {k: v for k, v in answers.items() if k in qs}, calibrated=calibrated)

    return create_classifier(style="custom", evaluate=evaluate, model=model), seen


QS = [noul("toxic", "Is `text` toxic?"), choice("lang", "Which language?", {"en": "English", "fr": "French"}),
      score("tone", "How formal?", ["casual", "neutral", "formal"])]


def test_public_names():
    top = ["Bands", "noul", "choice", "score", "questions", "state", "context", "JudgeAnswer", "ask", "Rule", "Policy",
           "Outcome", "decide", "gate", "static_classifier", "decision_wire", "question_from_wire", "Tape"]
    for name in top:
        assert name in judge.__all__ and getattr(toolnexus, name) is getattr(judge, name)
    for name in ("DEFAULT_BANDS", "NamedQuestion", "read"):
        assert name in judge.__all__ and name not in toolnexus.__all__
    assert [f.name for f in dataclasses.fields(Rule)] == ["question", "action", "below", "at_least", "is_", "target"]
    assert [f.name for f in dataclasses.fields(Outcome)] == ["action", "target", "escalated", "request", "answers"]
    assert [f.name for f in dataclasses.fields(Policy)] == ["rules", "default", "bands", "skip_uncertain"]


def test_bands():
    assert DEFAULT_BANDS == Bands(0.30, 0.70)
    assert [DEFAULT_BANDS.noul(p) for p in (0.29, 0.30, 0.70, 0.71)] == ["no", "uncertain", "uncertain", "yes"]
    assert DEFAULT_BANDS.sure(0.71) and not DEFAULT_BANDS.sure(0.70) and not DEFAULT_BANDS.sure(0.9, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_BANDS.low = 0.1  # type: ignore[misc]


def test_builders_yield_the_classifier_objects():
    assert noul("a", "i") == ("a", NoulQuestion("i"))
    assert noul("a", "i", true="yes it is") == ("a", NoulQuestion("i", NoulCriteria("yes it is", "")))
    assert choice("c", "i", {"x": "X"}) == ("c", ChoiceQuestion("i", {"x": "X"}))
    assert score("s", "i", ("lo", "hi")) == ("s", ScoreQuestion("i", ["lo", "hi"]))
    assert list(questions(QS)) == ["toxic", "lang", "tone"]
    with pytest.raises(ClassifierError) as e:
        questions([noul("a", "x"), noul("a", "y")])
    assert str(e.value) == 'duplicate question name "a"'
    assert state("judge", {"text": "t"}) == {"role": "judge", "text": "t"}
    assert state("judge", "plain") == {"role": "judge", "data": "plain"}
    assert context("ctx", "msg", {"extra": 1}) == {"context": "ctx", "message": "msg", "extra": 1}
    assert context("ctx", "msg") == {"context": "ctx", "message": "msg"}


async def test_ask_reads_every_answer_through_bands():
    clf, seen = fixed({"toxic": NoulAnswer(0.8), "lang": ChoiceAnswer("fr", {"en": 0.5, "fr": 0.5}, 0.9, True),
                       "tone": ScoreAnswer(1.2, {}, {}, 0.75)})
    st = {"text": "Bonjour"}
    ans = await ask(clf, st, QS)
    assert seen[0][0] == st and seen[0][0] is not st
    assert ans["toxic"].band == "yes" and ans["toxic"].sure is None and not ans["toxic"].uncertain
    assert ans["lang"].sure is False and ans["lang"].uncertain and ans["lang"].choice() == "fr"
    assert ans["tone"].sure is True and ans["tone"].value() == 1.2 and ans["tone"].type == "score"
    assert ans["lang"].value() == 0.9
    with pytest.raises(ClassifierError) as e:
        ans["toxic"].choice()
    assert str(e.value) == "judge: answer is a noul answer, not choice"
    strict = read(Decision("m", {"toxic": NoulAnswer(0.8)}), Bands(0.1, 0.9))
    assert strict["toxic"].band == "uncertain"


def answers(**values):
    out = {}
    for k, v in values.items():
        if isinstance(v, str):
            out[k] = JudgeAnswer(ChoiceAnswer(v, {v: 1.0}, 0.95), sure=True)
        elif isinstance(v, tuple):
            out[k] = JudgeAnswer(ScoreAnswer(v[0], {}, {}, v[1]), sure=v[1] > 0.7)
        else:
            out[k] = JudgeAnswer(NoulAnswer(v), band=DEFAULT_BANDS.noul(v))
    return out


def test_decide_rules_in_order_first_decisive_wins():
    ans = answers(toxic=0.9, lang="fr", tone=(2.0, 0.9))
    assert decide(ans, Policy([Rule("toxic", "block", at_least=0.95), Rule("toxic", "flag", at_least=0.8)])) == Outcome(
        "flag")
    assert decide(ans, Policy([Rule("lang", "translate", is_="fr", target="en")])) == Outcome("translate", "en")
    assert decide(ans, Policy([Rule("lang", "x", is_="en"), Rule("tone", "formal", at_least=2)])) == Outcome("formal")
    assert decide(ans, Policy([Rule("tone", "casual", below=1, at_least=3)])) == Outcome(answers=ans)
    assert decide(answers(toxic=0.1), Policy([Rule("toxic", "allow", below=0.2, at_least=0.0)])).action == "allow"


@pytest.mark.parametrize("rule,reason", [
    (Rule("missing", "x", at_least=0.5), 'missing answer "missing"'),
    (Rule("unsure", "x", at_least=0.5), 'uncertain answer "unsure"'),
    (Rule("toxic", "x", is_="yes"), "is-rule on noul answer 'toxic'"),
    (Rule("lang", "x", below=0.5), "numeric rule on choice answer 'lang'"),
    (Rule("toxic", "x"), "rule on 'toxic' has no below / at_least / is"),
])
def test_decide_escalates_with_a_serialisable_request(rule, reason):
    ans = answers(toxic=0.9, lang="fr", unsure=0.5)
    out = decide(ans, Policy([Rule("toxic", "noop", below=0.0), rule]))
    q = rule.question
    assert out.escalated and out.action == "needs_input" and out.target == "" and out.answers is ans
    assert out.request == Request(
        id=f"gate:1:{q}",
        kind="input",
        prompt=f"Classifier is unsure about {q!r} ({reason}).",
        data={"question": q, "reason": reason, "answers": {k: a.to_dict() for k, a in ans.items()}},
    )


def test_skip_uncertain_passes_over_uncertain_answers():
    ans = answers(unsure=0.5, toxic=0.9)
    policy = Policy([Rule("unsure", "a", at_least=0.0), Rule("toxic", "b", at_least=0.8)], skip_uncertain=True)
    assert decide(ans, policy) == Outcome("b")


async def test_gate_with_rules_and_with_a_policy():
    clf, _ = fixed({"toxic": NoulAnswer(0.1)})
    qs = [noul("toxic", "Is it toxic?")]
    assert await gate(clf, {"text": "hi"}, qs, [Rule("toxic", "block", at_least=0.7)]) == Outcome(
        answers=await ask(clf, {"text": "hi"}, qs))
    assert await gate(clf, {}, qs, Policy([Rule("toxic", "block", at_least=0.7)], default="allow")) == Outcome("allow")
    out = await gate(clf, {}, qs, Policy([Rule("toxic", "block", at_least=0.7)]))
    assert out.escalated and out.request.id == "gate:default"
    assert out.request.prompt == "Classifier is unsure about '' (no rule fired)."
    assert out.request.data["question"] == "" and out.request.data["reason"] == "no rule fired"
    clf, _ = fixed({"toxic": NoulAnswer(0.5)})
    loose = Policy([Rule("toxic", "block", at_least=0.45)], bands=Bands(0.2, 0.4))
    assert (await gate(clf, {}, qs, loose)).action == "block"  # the policy's bands make 0.5 a clear yes
    assert (await gate(clf, {}, qs, loose, bands=Bands(0.3, 0.7))).escalated  # explicit bands win


def test_decision_wire_and_question_from_wire():
    d = Decision("jev", {"a": NoulAnswer(0.2), "b": ChoiceAnswer("x", {"x": 1.0}, 0.9, True),
                         "c": ScoreAnswer(1, {"0": "lo"}, {"0": 1.0}, 0.8)}, calibrated=False)
    assert decision_wire(d) == {"model": "jev", "calibrated": False, "answers": {
        "a": {"type": "noul", "noul": 0.2},
        "b": {"type": "choice", "choice": "x", "probabilities": {"x": 1.0}, "confidence": 0.9},
        "c": {"type": "score", "score": 1, "legend": {"0": "lo"}, "probabilities": {"0": 1.0}, "confidence": 0.8}}}
    for _, q in QS + [noul("n", "i", "t", "f")]:
        from toolnexus.classifier import question_wire

        assert question_from_wire(question_wire(q)) == q
    with pytest.raises(KeyError):
        question_from_wire({"type": "choice", "instructions": "i"})


async def test_static_classifier_accepts_question_lists_and_maps():
    response = {"model": "rec", "answers": {"toxic": {"type": "noul", "noul": 0.9}}}
    clf = static_classifier(({"text": "a"}, [noul("toxic", "Is it toxic?")], response),
                            ({"text": "b"}, {"toxic": NoulQuestion("Is it toxic?")}, json.dumps(response)),
                            model="rec-model")
    assert clf.style == "static" and clf.model == "rec-model"
    for text in "ab":
        assert (await ask(clf, {"text": text}, [noul("toxic", "Is it toxic?")]))["toxic"].band == "yes"


async def test_tape_records_then_replays_by_call_name():
    live, seen = fixed({"toxic": NoulAnswer(0.85)}, model="jev-live")
    tape = Tape(live)
    qs = [noul("toxic", "Is it toxic?")]
    first = await ask(tape.call("screen"), {"text": "x"}, qs)
    assert tape.model == "jev-live" and len(seen) == 1
    assert tape.recorded == {"screen": {"state": {"text": "x"}, "questions": {"toxic": {"type": "noul",
                                                                                       "instructions": "Is it toxic?"}},
                                        "response": {"model": "jev-live", "answers": {"toxic": {"type": "noul",
                                                                                               "noul": 0.85}},
                                                     "calibrated": True}}}
    stored = json.loads(json.dumps(tape.recorded))  # a tape is plain JSON
    replay = Tape(recorded=stored, model="jev-live")
    again = await ask(replay.call("screen"), {"text": "x"}, qs)
    assert again["toxic"].band == first["toxic"].band == "yes" and len(seen) == 1
    with pytest.raises(ClassifierError) as e:
        await replay.call("other").evaluate({}, questions(qs))
    assert str(e.value) == 'tape: no recorded decision for call "other"'


# -- beyond 0.21 -----------------------------------------------------------------------------------------------


async def test_escalation_requests_hold_json_answers_while_the_outcome_keeps_objects():
    """An escalation's Request.data["answers"] now holds plain JSON dicts, so a pending request can be serialised;
    Outcome.answers keeps the JudgeAnswer objects."""
    clf, _ = fixed({"toxic": NoulAnswer(0.5), "lang": ChoiceAnswer("en", {"en": 0.6, "fr": 0.4}, 0.6)})
    out = await gate(clf, {}, [noul("toxic", "t?"), choice("lang", "l?", {"en": "E", "fr": "F"})],
                     [Rule("toxic", "block", at_least=0.7)])
    assert isinstance(out.answers["toxic"], JudgeAnswer)
    data = json.loads(json.dumps(dataclasses.asdict(out.request)))["data"]
    assert data["answers"] == {"toxic": {"type": "noul", "noul": 0.5, "band": "uncertain", "sure": None},
                               "lang": {"type": "choice", "choice": "en", "probabilities": {"en": 0.6, "fr": 0.4},
                                        "confidence": 0.6, "band": None, "sure": False}}


def test_judge_inputs_are_checked_and_the_role_argument_wins():
    """Judge inputs are now checked: Bands(low > high) raises, state() keeps the role argument over a role key in
    the data, and question_from_wire refuses an unknown type instead of reading it as a score."""
    with pytest.raises(ClassifierError, match="low above high"):
        Bands(0.8, 0.2)
    with pytest.raises(ClassifierError, match="within 0..1"):
        Bands(-0.1, 0.5)
    assert state("guard", {"role": "attacker", "text": "t"}) == {"role": "guard", "text": "t"}
    with pytest.raises(ClassifierError) as e:
        question_from_wire({"type": "vote", "instructions": "i", "criteria": []})
    assert str(e.value) == "judge: unknown question type 'vote' (expected noul, choice or score)"
