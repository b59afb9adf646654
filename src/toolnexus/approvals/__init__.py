"""Approvals: a policy instead of hand-written checks, on any tool, on every path.

Declare it once — on a tool (`define_tool(fn, needs_approval=True | predicate | ApprovalRule)`),
on a toolkit or an agent (`approvals={"bash": True, "mcp:github/*": True}`), on an MCP server
(`"requireApproval"` in the config) or on the command line (`--approve TOOL`) — and the tool's
body never runs before a human said yes. The human sees an approval request that says which
tool, from where, with which arguments (secrets redacted), for which agent; they approve, approve
with edited arguments, reject with a message, or decide `always` for the rest of the run. A rule
can also ask N distinct people (the two-person rule) and escalate an expired request to another
group; both are request state, so they survive a restart.

- `_rules.py`: `ApprovalRule`, `Escalate`, `ApprovalPolicy` (names, globs, sources, predicates).
- `_requests.py`: the approval request's shape and its one-line prompt; redaction.
- `_decisions.py`: `decide` (run / decline / reask / invalid), `answer_problem`, typed replies.
- `_gate.py`: the gate that wraps a tool's `execute`.
- `_memory.py`: sticky decisions (`ApprovalMemory`) and what a client knows (`ApprovalScope`).
- `_answerers.py`: who may answer what (`Answerers`: the host's groups; `group_of(request)`;
  `answerer_problem`: the rule every path applies).

See docs/approvals.md for the whole picture and the comparison with other libraries.
"""

from ._answerers import Answerers, answerer_problem, group_of
from ._decisions import DECLINE, INVALID, REASK, RUN, Decision, answer_from_text, answer_problem, decide, edited_note
from ._gate import APPROVED_AS, Enforced, enforce, gate_tool, is_gated, suspended_on
from ._memory import ApprovalMemory, ApprovalScope
from ._requests import (
                       APPROVAL_KIND,
                       approval_of,
                       approval_request,
                       is_approval_request,
                       redact_arguments,
                       reissued,
                       render_prompt,
                       restore_redacted,
                       stamp,
)
from ._rules import (
                       DEFAULT_APPROVAL_TOOLS,
                       ApprovalPolicy,
                       ApprovalRule,
                       Escalate,
                       NeedsApproval,
                       qualified_name,
                       rule_of,
)

__all__ = [
    "APPROVAL_KIND",
    "APPROVED_AS",
    "Answerers",
    "DEFAULT_APPROVAL_TOOLS",
    "ApprovalMemory",
    "ApprovalPolicy",
    "ApprovalRule",
    "ApprovalScope",
    "DECLINE",
    "Decision",
    "Enforced",
    "Escalate",
    "INVALID",
    "NeedsApproval",
    "REASK",
    "RUN",
    "answer_from_text",
    "answer_problem",
    "answerer_problem",
    "approval_of",
    "approval_request",
    "decide",
    "edited_note",
    "enforce",
    "group_of",
    "gate_tool",
    "is_approval_request",
    "is_gated",
    "qualified_name",
    "redact_arguments",
    "reissued",
    "render_prompt",
    "restore_redacted",
    "rule_of",
    "stamp",
    "suspended_on",
]
