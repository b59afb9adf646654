"""The parts of approvals that need no run: `Answer`'s new fields, which tools a policy names, the
request a human is shown (one line, secrets redacted), how typed replies read, `requireApproval`
in an MCP config, and the warnings for names that match nothing."""

from __future__ import annotations

import dataclasses
import json
import logging
from datetime import UTC

import pytest

from toolnexus import Answer, Request, Tool, ToolContext, ToolResult, create_toolkit, define_tool, tool
from toolnexus.approvals import (
    ApprovalPolicy,
    ApprovalRule,
    Escalate,
    answer_from_text,
    answer_problem,
    approval_of,
    approval_request,
    decide,
    is_gated,
    stamp,
)
from toolnexus.errors import ToolnexusTypeError, ToolnexusValueError
from toolnexus.mcp_source._config import server_spec


async def _noop(args=None, ctx=None) -> ToolResult:
    return ToolResult("ran", False)


def _tool(name: str, source: str = "native", origin: str | None = None) -> Tool:
    schema = {"type": "object", "properties": {}}
    return Tool(name, f"The {name} tool.", schema, source, _noop, origin=origin)  # type: ignore[arg-type]


def test_answer_fields_are_checked_and_round_trip_as_plain_json() -> None:
    full = Answer(id="r", ok=True, message="fine", arguments={"a": 1}, always=True, by="ann", via="cli")
    assert Answer.from_dict(json.loads(json.dumps(dataclasses.asdict(full)))) == full
    for bad, message in [({"message": 3}, "Answer message must be a str"),
                         ({"arguments": [1]}, "Answer arguments must be a dict"),
                         ({"always": "yes"}, "Answer always must be True or False"),
                         ({"by": 1}, "Answer by must be a str"), ({"via": b"cli"}, "Answer via must be a str")]:
        with pytest.raises(ToolnexusTypeError, match=message):
            Answer(id="r", ok=True, **bad)  # type: ignore[arg-type]


def test_a_policy_names_tools_by_name_glob_and_source_and_an_exact_name_wins() -> None:
    policy = ApprovalPolicy({"mcp:github/*": True, "mcp:github/list_issues": False, "bash": True, "deploy_*": True,
                             "builtin:read": False})
    github = _tool("github_create_issue", "mcp", "github/create_issue")
    listing = _tool("github_list_issues", "mcp", "github/list_issues")
    assert policy.rule_for(github) == ApprovalRule() and policy.rule_for(listing) is None
    assert policy.rule_for(_tool("bash", "builtin")) is not None and policy.rule_for(_tool("deploy_web")) is not None
    assert policy.rule_for(_tool("read", "builtin")) is None and policy.rule_for(_tool("other")) is None
    assert ApprovalPolicy(["mcp:*"]).rule_for(github) is not None  # a source kind
    assert policy.unmatched([github, listing]) == ["bash", "builtin:read", "deploy_*"]
    with pytest.raises(ToolnexusTypeError, match="write \\['bash'\\]"):
        ApprovalPolicy("bash")
    with pytest.raises(ToolnexusTypeError, match="approvals\\['x'\\] must be True, False, a predicate"):
        ApprovalPolicy({"x": 3})


def test_rules_are_checked_where_they_are_written() -> None:
    with pytest.raises(ToolnexusValueError, match="approvals must be a whole number of at least 1"):
        ApprovalRule(approvals=0)
    with pytest.raises(ToolnexusValueError, match='on_expiry must be "decline" or Escalate'):
        ApprovalRule(on_expiry="oncall")
    with pytest.raises(ToolnexusValueError, match="expires_in must be a number of seconds above 0"):
        ApprovalRule(expires_in=-1)
    with pytest.raises(ToolnexusValueError, match="Escalate needs a group name"):
        Escalate("")
    with pytest.raises(ToolnexusTypeError, match="define_tool\\('f'\\) needs_approval must be"):
        define_tool(lambda: None, name="f", needs_approval="yes")


async def test_a_predicate_decides_per_call_sync_or_async_and_fails_closed(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "toolnexus")
    ran: list[float] = []

    async def over_100(args: dict, ctx: ToolContext | None) -> bool:
        return args["amount"] >= 100

    @tool(needs_approval=over_100)
    def refund(amount: float) -> str:
        """Refund an amount."""
        ran.append(amount)
        return "refunded"

    assert is_gated(refund) and isinstance(refund.needs_approval, ApprovalRule)
    assert (await refund.execute({"amount": 40})).output == "refunded" and ran == [40]  # under $100: silently
    asked = await refund.execute({"amount": 400})
    assert approval_of(asked.metadata["pending"])["arguments"] == {"amount": 400} and ran == [40]
    invalid = await refund.execute({"amount": "lots"})  # nobody is asked about a call that cannot run
    assert invalid.output.startswith("invalid arguments for refund: ") and ran == [40]

    broken = define_tool(lambda amount: "x", name="broken", input_schema={"type": "object"},
                         needs_approval=lambda args, ctx: args["missing"])
    assert (await broken.execute({"amount": 1})).metadata["pending"].kind == "approval"
    assert any("the approval predicate of \"broken\" raised KeyError" in r.getMessage() for r in caplog.records)


def test_the_request_says_everything_in_one_line_with_secrets_redacted() -> None:
    target = _tool("github_create_issue", "mcp", "github/create_issue")
    req = approval_request(target, {"title": "x" * 300, "api_token": "sk-123", "nested": {"password": "p"}},
                           ApprovalRule(approvals=2, group="leads"))
    a = approval_of(req)
    assert a["arguments"]["api_token"] == "«redacted»" and a["arguments"]["nested"] == {"password": "«redacted»"}
    assert "sk-123" not in json.dumps(dataclasses.asdict(req))
    stamp(req, "call_9", ["root", "triage.1"])
    assert (a["call_id"], a["agent_path"], a["required"], a["group"]) == ("call_9", ["root", "triage.1"], 2, "leads")
    assert req.prompt.startswith('Approve github_create_issue {"api_token": "«redacted»", ')
    assert "(mcp:github/create_issue, agent root/triage.1) The github_create_issue tool." in req.prompt
    assert req.prompt.endswith(" [0 of 2 approvals] [for leads]") and "\n" not in req.prompt and "…" in req.prompt


async def test_an_edit_keeps_the_secrets_it_was_shown_redacted() -> None:
    got: list[dict] = []
    t = define_tool(lambda user, api_key: got.append({"user": user, "api_key": api_key}) or "ok", name="login",
                    input_schema={"type": "object", "properties": {"user": {"type": "string"},
                                                                   "api_key": {"type": "string"}}},
                    needs_approval=True)
    req = (await t.execute({"user": "a", "api_key": "s3cret"})).metadata["pending"]
    shown = approval_of(req)["arguments"]
    edited = {**shown, "user": "b"}
    result = await t.execute({"user": "a", "api_key": "s3cret"},
                             ToolContext(answer=Answer(id=req.id, ok=True, arguments=edited), request=req))
    assert got == [{"user": "b", "api_key": "s3cret"}] and "s3cret" not in result.output


def test_decisions_two_person_rule_and_escalation() -> None:
    from datetime import datetime

    now = datetime(2030, 1, 1, tzinfo=UTC)
    req = approval_request(_tool("release"), {}, ApprovalRule(approvals=2, on_expiry=Escalate("oncall")), now)
    assert answer_problem(req, Answer(id=req.id, ok=True, by="a", always=True)).startswith("this call needs 2")
    assert "reject it with a message instead of editing" in answer_problem(
        req, Answer(id=req.id, ok=True, by="a", arguments={}))
    one = decide(req, Answer(id=req.id, ok=True, by="a"), now)
    assert one.kind == "reask" and one.request.id == req.id + ".a1"
    assert decide(one.request, Answer(id=one.request.id, ok=True, by="b"), now).kind == "run"
    assert decide(one.request, Answer(id=one.request.id, ok=False), now).kind == "decline"  # one veto declines
    late = decide(req, Answer(id=req.id, ok=False, reason="expired"), now)
    assert late.kind == "reask" and approval_of(late.request)["group"] == "oncall" and late.request.expiresAt is None
    again = decide(late.request, Answer(id=late.request.id, ok=False, reason="expired"), now)
    assert again.kind == "decline" and again.text == f"declined/expired: {late.request.prompt}"


@pytest.mark.parametrize("text, ok, extra", [
    ("yes", True, {}), ("approve", True, {}), ("always", True, {"always": True}),
    ("no", False, {}), ("reject: too big", False, {"message": "too big"}),
    ("No, too big", False, {"message": "too big"}),
    ('edit {"n": 2}', True, {"arguments": {"n": 2}}), ('{"approve": false, "message": "m"}', False, {"message": "m"}),
    ("maybe later", False, {"message": "maybe later"}),  # unclear: declines, carrying the text
])
def test_a_typed_reply_reads_as_a_decision(text: str, ok: bool, extra: dict) -> None:
    answer = answer_from_text(Request(id="r", kind="approval", prompt="p"), text, via="a2a")
    assert answer.ok is ok and answer.via == "a2a"
    for key, value in extra.items():
        assert getattr(answer, key) == value


def test_require_approval_in_an_mcp_server_entry() -> None:
    base = {"command": ["srv"]}
    assert server_spec("s", {**base, "requireApproval": "always"}).needs_approval("any") is True
    assert server_spec("s", {**base, "requireApproval": "never"}).needs_approval("any") is False
    per_tool = server_spec("s", {**base, "requireApproval": {"write": "always", "read": False}})
    assert (per_tool.needs_approval("write"), per_tool.needs_approval("read"), per_tool.needs_approval("x")) == (
        True, False, False)
    with pytest.raises(ValueError, match='"requireApproval" must be "always", "never" or an object'):
        server_spec("s", {**base, "requireApproval": True})
    with pytest.raises(ValueError, match='maps tool names to "always" or "never", got a string for "w"'):
        server_spec("s", {**base, "requireApproval": {"w": "sometimes"}})


async def test_a_policy_name_matching_no_tool_is_a_warning_naming_it(caplog: pytest.LogCaptureFixture, exits) -> None:
    caplog.set_level(logging.WARNING, "toolnexus")
    tk = await create_toolkit(builtins=False, extra_tools=[_tool("deploy")], approvals={"deploy": True,
                                                                                       "deplyo": True})
    exits.push_async_callback(tk.close)
    assert is_gated(tk.get("deploy"))
    assert '[toolnexus] approvals name "deplyo" matched no tool' in [r.getMessage() for r in caplog.records]
    assert tk.get("deploy") is tk.get("deploy") and tk.tools()[0] is tk.get("deploy")  # one gated copy
