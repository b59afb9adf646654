"""The in-process metrics registry behind `Client.metrics()`: events in, Prometheus text out.

The client loop hands every metric event it emits (`llm`, `tool`, `run`) to
`MetricsRegistry.record`; `render()` produces the pinned Prometheus exposition text byte for
byte: the twelve HELP/TYPE header lines in a fixed order, each metric's series right after its
TYPE line, sorted by their rendered label string (code-point order), integral numbers without a
decimal point and all other numbers as `repr(float)`.

Choices of ours:
- Unknown event names and unknown keys (e.g. the additive `attempts` on `llm`) are ignored.
- Usage details: an `llm` event's `cached_tokens`, `cache_creation_tokens` and `reasoning_tokens`
  (present when the provider reported them) add to `toolnexus_llm_tokens_total` series of type
  `cache_read`, `cache_creation` and `reasoning`; those series appear once a figure was non-zero.
  They are parts of the `prompt` / `completion` series, not additions to them.
- A missing or non-numeric `ms` / token count counts as 0, and a missing label value renders as
  `""`: the registry sits on the run's hot path, so it must never be the thing that fails a run.
- A histogram's series are its label sets (without `le`); each is sorted as one block of
  `_bucket` lines (ascending `le`, `+Inf` last), then `_sum`, then `_count`.

It deliberately does not export, push, reset or expire anything, and holds no per-run state.
"""

from __future__ import annotations

import math
import threading
from typing import Any

#: Histogram bucket upper bounds in seconds, as pinned; `+Inf` is implicit.
BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_LLM_REQUESTS = "toolnexus_llm_requests_total"
_LLM_TOKENS = "toolnexus_llm_tokens_total"
_LLM_DURATION = "toolnexus_llm_request_duration_seconds"
_TOOL_CALLS = "toolnexus_tool_calls_total"
_TOOL_DURATION = "toolnexus_tool_duration_seconds"
_RUN_ERRORS = "toolnexus_run_errors_total"

# (name, help, type) in the pinned rendering order.
_FAMILIES: tuple[tuple[str, str, str], ...] = (
    (_LLM_REQUESTS, "Total LLM requests.", "counter"),
    (_LLM_TOKENS, "Total tokens, by type.", "counter"),
    (_LLM_DURATION, "LLM request duration in seconds.", "histogram"),
    (_TOOL_CALLS, "Total tool calls.", "counter"),
    (_TOOL_DURATION, "Tool execution duration in seconds.", "histogram"),
    (_RUN_ERRORS, "Total run errors.", "counter"),
)

Labels = tuple[tuple[str, str], ...]
_DETAIL_TYPES = (("cached_tokens", "cache_read"), ("cache_creation_tokens", "cache_creation"),
                 ("reasoning_tokens", "reasoning"))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _label_text(labels: Labels) -> str:
    """The inside of `{…}`: `k="v",…` in the given order, values escaped."""
    return ",".join(f'{k}="{_escape(v)}"' for k, v in labels)


def _format_number(value: float) -> str:
    """Integral numbers without `.`, others `repr(float)`; non-finite in Prometheus spelling."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer():
        return str(int(value))
    return repr(float(value))


def _number(value: Any) -> float:
    """A numeric event field, or 0 when it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return value


def _label_value(value: Any) -> str:
    return "" if value is None else str(value)


def _flag(value: Any) -> str:
    return "true" if value else "false"


class _Histogram:
    """Cumulative bucket counts plus sum and count for one label set."""

    __slots__ = ("buckets", "total", "count")

    def __init__(self) -> None:
        self.buckets = [0] * len(BUCKETS)
        self.total: float = 0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(BUCKETS):
            if value <= bound:
                self.buckets[i] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str, labels: Labels) -> list[str]:
        out = []
        for bound, n in zip(BUCKETS, self.buckets, strict=True):
            out.append(f"{name}_bucket{{{_label_text(labels + (('le', _format_number(bound)),))}}} {n}")
        out.append(f"{name}_bucket{{{_label_text(labels + (('le', '+Inf'),))}}} {self.count}")
        inner = _label_text(labels)
        out.append(f"{name}_sum{{{inner}}} {_format_number(self.total)}")
        out.append(f"{name}_count{{{inner}}} {self.count}")
        return out


class MetricsRegistry:
    """Counters and histograms fed by client metric events; safe to share across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counters: dict[str, dict[Labels, float]] = {}
        self._histograms: dict[str, dict[Labels, _Histogram]] = {}

    def record(self, ev: dict[str, Any]) -> None:
        """Fold one metric event into the registry; events other than llm/tool/run are ignored."""
        kind = ev.get("event")
        with self._lock:
            if kind == "llm":
                self._record_llm(ev)
            elif kind == "tool":
                self._record_tool(ev)
            elif kind == "run":
                if ev.get("error"):
                    self._add(_RUN_ERRORS, (("model", _label_value(ev.get("model"))),), 1)

    def _record_llm(self, ev: dict[str, Any]) -> None:
        model = _label_value(ev.get("model"))
        status = _label_value(ev.get("status"))
        self._add(_LLM_REQUESTS, (("model", model), ("status", status)), 1)
        if status == "ok":
            self._add(_LLM_TOKENS, (("type", "prompt"),), _number(ev.get("prompt_tokens")))
            self._add(_LLM_TOKENS, (("type", "completion"),), _number(ev.get("completion_tokens")))
            for key, kind in _DETAIL_TYPES:
                amount = _number(ev.get(key))
                if amount:
                    self._add(_LLM_TOKENS, (("type", kind),), amount)
        self._observe(_LLM_DURATION, (("model", model),), _number(ev.get("ms")) / 1000)

    def _record_tool(self, ev: dict[str, Any]) -> None:
        tool = _label_value(ev.get("tool"))
        labels = (
            ("tool", tool),
            ("source", _label_value(ev.get("source"))),
            ("is_error", _flag(ev.get("is_error"))),
            ("pending", _flag(ev.get("pending"))),
        )
        self._add(_TOOL_CALLS, labels, 1)
        self._observe(_TOOL_DURATION, (("tool", tool),), _number(ev.get("ms")) / 1000)

    def _add(self, name: str, labels: Labels, amount: float) -> None:
        series = self._counters.setdefault(name, {})
        series[labels] = series.get(labels, 0) + amount

    def _observe(self, name: str, labels: Labels, value: float) -> None:
        self._histograms.setdefault(name, {}).setdefault(labels, _Histogram()).observe(value)

    def render(self) -> str:
        """The pinned Prometheus text, ending with a newline."""
        lines: list[str] = []
        with self._lock:
            for name, help_text, kind in _FAMILIES:
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {kind}")
                if kind == "counter":
                    series = self._counters.get(name, {})
                    for labels in sorted(series, key=_label_text):
                        lines.append(f"{name}{{{_label_text(labels)}}} {_format_number(series[labels])}")
                else:
                    hists = self._histograms.get(name, {})
                    for labels in sorted(hists, key=_label_text):
                        lines.extend(hists[labels].lines(name, labels))
        return "\n".join(lines) + "\n"
