"""A runtime's link to its durable store: what changed, one commit at a time, under a lease.

`DurableRun` is everything an `AgentRuntime` built with a `RunStore` needs to make its run survive
the process. It is composed of parts, each in a module of its own and each testable alone:

- `Staging` (`_staging`): what the next commit writes — verbs and turns mark what they change;
  nothing is written until a commit; transcripts are append-only;
- `ConversationView` (`_view`): the runtime's conversation store over that staging;
- `CommitScheduler` (`_scheduler`): background commits, coalesced, within
  `BACKGROUND_COMMIT_DELAY`;
- `Lease` (`_lease`): held while this runtime works on the run, renewed in the background;
- `TurnJournal` (`_journal`): what one turn's client reports to (see `toolnexus.client._journal`);
- `TurnStore` (`_turn_store`): the conversation store one turn's client sees.

`DurableRun` itself (`_run`) takes what is staged and commits it as one transaction. It is built
before the runtime core it commits — the core is built with its `view` as conversation store — and
attached to that core once (`DurableRun.attach`), through the narrow `DurableHost` protocol.

Not here: deciding what a turn does (`turn.py`), rebuilding a run from the store (`restore.py`).
"""

from __future__ import annotations

from ._host import DurableHost as DurableHost
from ._journal import TurnJournal as TurnJournal
from ._lease import Lease as Lease
from ._run import DurableRun as DurableRun
from ._scheduler import BACKGROUND_COMMIT_DELAY as BACKGROUND_COMMIT_DELAY, CommitScheduler as CommitScheduler
from ._staging import Staging as Staging
from ._turn_store import TurnStore as TurnStore
from ._view import ConversationView as ConversationView

