"""The names a toolnexus run uses on a Temporal cluster: workflow and activity types, its update
and query handlers, search attributes and memo keys, and the default task queue.

They are constants so that a worker and a host in different processes (or different releases)
agree on them; changing one is a wire change. Nothing here imports the Temporal SDK.
"""

from __future__ import annotations

WORKFLOW_TYPE = "toolnexus.AgentRun"
LLM_ACTIVITY = "toolnexus.llm"
TOOL_ACTIVITY = "toolnexus.tool"

ANSWER_UPDATE = "toolnexus.answer"
SETTLED_UPDATE = "toolnexus.settled"
PENDING_QUERY = "toolnexus.pending"
STATUS_QUERY = "toolnexus.status"
TRANSCRIPT_QUERY = "toolnexus.transcript"

#: Keyword: the run's status as `store.runs()` reports it (running, pending, done, error, ...).
SA_STATUS = "ToolnexusStatus"
#: KeywordList: the ids of the requests the run waits on (what `pending()` routes answers by).
SA_REQUESTS = "ToolnexusRequests"
#: Keyword: the entry agent's name.
SA_AGENT = "ToolnexusAgent"
SEARCH_ATTRIBUTES = {SA_STATUS: "Keyword", SA_REQUESTS: "KeywordList", SA_AGENT: "Keyword"}

#: Memo key holding the pending requests (plain JSON), so listing them needs no live worker.
MEMO_PENDING = "toolnexus.pending"

DEFAULT_TASK_QUEUE = "toolnexus"

#: What a workflow sends in place of the API key; the LLM activity puts the worker's key back.
#: The key itself never enters workflow history.
KEY_PLACEHOLDER = "toolnexus-worker-api-key"
