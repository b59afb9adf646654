"""`question` (suspends via a kind:"question" Request) and `todowrite` (stateless rendering)."""

from __future__ import annotations

import re

import pytest

from toolnexus.builtin import create_builtin_tools
from toolnexus.types import Answer, Request, ToolContext, answer_declined, pending_of


@pytest.fixture
def tools():
    return {t.name: t for t in create_builtin_tools()}


QUESTIONS = [
    {"question": "Color?", "header": "Pick one", "options": ["red", "blue"], "multiple": True},
    {"question": "Why?"},
]


async def test_question_suspends_with_the_pinned_prompt(tools):
    result = await tools["question"].execute({"questions": QUESTIONS})
    assert result.is_error
    assert result.output == "Color? (options: red, blue)\nWhy?"
    request = pending_of(result)
    assert isinstance(request, Request)
    assert request.kind == "question"
    assert request.prompt == "Color? (options: red, blue)\nWhy?"
    assert request.data == {"questions": QUESTIONS}
    assert re.fullmatch(r"pnd-[0-9a-f]+-\d+", request.id)


@pytest.mark.parametrize(
    ("questions", "prompt"),
    [
        ([{"question": "Q", "options": []}], "Q"),  # empty options are not rendered
        ([{"question": "Q", "options": "a,b"}], "Q"),  # options must be a list
        ([{"question": 5, "options": ["a"]}], " (options: a)"),  # non-str question renders as ""
        ([{"question": "Q", "options": [1, None]}], "Q (options: 1, None)"),
        (["Plain string?"], "Plain string?"),
        ([], ""),
    ],
)
async def test_question_rendering_edge_cases(tools, questions, prompt):
    result = await tools["question"].execute({"questions": questions})
    assert result.output == prompt and pending_of(result).prompt == prompt


async def test_question_with_a_non_list_asks_nothing(tools):
    result = await tools["question"].execute({"questions": "Color?"})
    assert result.output == "" and pending_of(result).data == {"questions": []}


async def test_question_retry_returns_the_answer_data_as_json(tools):
    answer = Answer(id="pnd-1-1", ok=True, data={"Color?": ["red"], "Why?": "because"})
    result = await tools["question"].execute({"questions": QUESTIONS}, ToolContext(answer=answer))
    assert not result.is_error
    assert result.output == '{"Color?": ["red"], "Why?": "because"}'
    assert pending_of(result) is None


async def test_question_retry_with_a_declined_answer_returns_empty_json(tools):
    result = await tools["question"].execute({"questions": QUESTIONS}, ToolContext(answer=answer_declined("pnd-1-1")))
    assert result.output == "{}" and not result.is_error


async def test_todowrite_renders_the_pinned_list(tools):
    todos = [
        {"id": "1", "text": "write tests", "completed": True},
        {"id": "2", "text": "ship", "completed": False},
        {"id": "3", "text": None, "completed": 1},
    ]
    result = await tools["todowrite"].execute({"todos": todos})
    assert result.output == "[x] write tests\n[ ] ship\n[x] "
    assert result.metadata == {"todos": todos} and not result.is_error


@pytest.mark.parametrize("todos", [[], None, "not a list"])
async def test_todowrite_empty_is_pinned(tools, todos):
    result = await tools["todowrite"].execute({"todos": todos})
    assert result.output == "(no todos)" and result.metadata == {"todos": []}


async def test_todowrite_is_stateless(tools):
    await tools["todowrite"].execute({"todos": [{"id": "1", "text": "a", "completed": False}]})
    assert (await tools["todowrite"].execute({})).output == "(no todos)"
