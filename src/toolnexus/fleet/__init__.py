"""`toolnexus.fleet`: runs that look after themselves, on the stores we already have.

`Worker(store, agents=[...], llm=...)` — or `toolnexus worker --store URL --agents MODULE:ATTR` —
is one process of a fleet: any number of them on one PostgreSQL database (or one SQLite file on
one machine) start submitted runs, apply submitted answers, take over runs whose holder died,
fire expiries and timers while nothing runs, and drain gracefully; see `_worker.py`. A front-end
only writes to the store: `store.submit_run(agent, prompt)`, `store.submit_answer(answer)`,
`store.pending(limit=...)`, `store.runs(limit=...)`, `store.cancel_run(run_id)`.

Layering: above the agent runtime and the stores (it drives the first on the second), beside
`toolnexus.serve` and `toolnexus.temporal`; nothing below imports it.
"""

from __future__ import annotations

from ..agents._timers import timer
from ._metrics import FleetMetrics
from ._worker import Worker

__all__ = ["Worker", "FleetMetrics", "timer"]
