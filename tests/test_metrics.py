"""The pinned Prometheus rendering of `MetricsRegistry` (client.md §11), byte for byte."""

from __future__ import annotations

import threading

from toolnexus.client._metrics import MetricsRegistry

HEADERS = [
    "# HELP toolnexus_llm_requests_total Total LLM requests.",
    "# TYPE toolnexus_llm_requests_total counter",
    "# HELP toolnexus_llm_tokens_total Total tokens, by type.",
    "# TYPE toolnexus_llm_tokens_total counter",
    "# HELP toolnexus_llm_request_duration_seconds LLM request duration in seconds.",
    "# TYPE toolnexus_llm_request_duration_seconds histogram",
    "# HELP toolnexus_tool_calls_total Total tool calls.",
    "# TYPE toolnexus_tool_calls_total counter",
    "# HELP toolnexus_tool_duration_seconds Tool execution duration in seconds.",
    "# TYPE toolnexus_tool_duration_seconds histogram",
    "# HELP toolnexus_run_errors_total Total run errors.",
    "# TYPE toolnexus_run_errors_total counter",
]
LES = ["0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60"]


def section(text: str, family: str) -> list[str]:
    """The series lines rendered after `# TYPE <family>` up to the next header line."""
    lines = text.split("\n")
    start = lines.index(next(line for line in lines if line.startswith(f"# TYPE {family} "))) + 1
    out = []
    for line in lines[start:]:
        if line.startswith("#") or line == "":
            break
        out.append(line)
    return out


def hist_lines(name: str, labels: str, counts: list[int], total: int, s: str) -> list[str]:
    """Expected histogram block: ten finite buckets with the given cumulative counts, +Inf, sum, count."""
    out = [f'{name}_bucket{{{labels},le="{le}"}} {n}' for le, n in zip(LES, counts, strict=True)]
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {total}')
    out.append(f"{name}_sum{{{labels}}} {s}")
    out.append(f"{name}_count{{{labels}}} {total}")
    return out


def test_empty_registry_renders_exactly_the_twelve_header_lines_and_a_final_newline():
    assert MetricsRegistry().render() == "\n".join(HEADERS) + "\n"


def test_pinned_tool_example_renders_byte_for_byte():
    reg = MetricsRegistry()
    reg.record({"event": "tool", "tool": "bash", "source": "builtin", "is_error": False, "ms": 40.0})
    expected = list(HEADERS)
    calls_at = expected.index("# TYPE toolnexus_tool_calls_total counter") + 1
    expected.insert(
        calls_at, 'toolnexus_tool_calls_total{tool="bash",source="builtin",is_error="false",pending="false"} 1'
    )
    dur_at = expected.index("# TYPE toolnexus_tool_duration_seconds histogram") + 1
    expected[dur_at:dur_at] = hist_lines("toolnexus_tool_duration_seconds", 'tool="bash"', [1] * 10, 1, "0.04")
    assert reg.render() == "\n".join(expected) + "\n"


def test_pending_suspension_and_error_flags_are_separate_tool_series():
    reg = MetricsRegistry()
    reg.record({"event": "tool", "tool": "t", "source": "native", "is_error": False, "ms": 1, "pending": True})
    reg.record({"event": "tool", "tool": "t", "source": "native", "is_error": True, "ms": 1})
    reg.record({"event": "tool", "tool": "t", "source": "native", "is_error": True, "ms": 1})
    assert section(reg.render(), "toolnexus_tool_calls_total") == [
        'toolnexus_tool_calls_total{tool="t",source="native",is_error="false",pending="true"} 1',
        'toolnexus_tool_calls_total{tool="t",source="native",is_error="true",pending="false"} 2',
    ]


def test_histogram_buckets_are_cumulative_with_sum_and_count():
    reg = MetricsRegistry()
    for ms in (30, 200, 3000, 45000, 120000):  # 0.03 s, 0.2 s, 3 s, 45 s, 120 s
        reg.record({"event": "tool", "tool": "slow", "source": "custom", "is_error": False, "ms": ms})
    assert section(reg.render(), "toolnexus_tool_duration_seconds") == hist_lines(
        "toolnexus_tool_duration_seconds", 'tool="slow"', [1, 1, 2, 2, 2, 2, 3, 3, 3, 4], 5, "168.23"
    )


def test_observation_on_a_bucket_bound_counts_in_that_bucket():
    reg = MetricsRegistry()
    reg.record({"event": "tool", "tool": "x", "source": "custom", "is_error": False, "ms": 1000})
    lines = section(reg.render(), "toolnexus_tool_duration_seconds")
    assert 'toolnexus_tool_duration_seconds_bucket{tool="x",le="0.5"} 0' in lines
    assert 'toolnexus_tool_duration_seconds_bucket{tool="x",le="1"} 1' in lines
    assert 'toolnexus_tool_duration_seconds_sum{tool="x"} 1' in lines


def test_label_values_escape_backslash_quote_and_newline():
    reg = MetricsRegistry()
    reg.record({"event": "run", "model": 'a\\b"c\nd', "error": "boom"})
    assert section(reg.render(), "toolnexus_run_errors_total") == [
        'toolnexus_run_errors_total{model="a\\\\b\\"c\\nd"} 1'
    ]


def test_series_are_sorted_by_rendered_label_string_in_code_point_order():
    reg = MetricsRegistry()
    # Code-point order puts "Z" (0x5A) before "a" (0x61) and "é" after both; the escaped
    # backslash renders as `\\` (0x5C), between "Z" and "a".
    for model in ("a", "é", "Z", "\\"):
        reg.record({"event": "run", "model": model, "error": "x"})
    assert section(reg.render(), "toolnexus_run_errors_total") == [
        'toolnexus_run_errors_total{model="Z"} 1',
        'toolnexus_run_errors_total{model="\\\\"} 1',
        'toolnexus_run_errors_total{model="a"} 1',
        'toolnexus_run_errors_total{model="é"} 1',
    ]


def test_sort_uses_the_rendered_string_not_the_raw_label_tuple():
    reg = MetricsRegistry()
    # Raw values sort "ab" < "ab\n" (LF, 0x0A) < 'ab"' (0x22); rendered they are `ab"`, `ab\""`
    # and `ab\n"`, and after the shared `ab\` prefix `"` (0x22) sorts before `n` (0x6E).
    for model in ('ab"', "ab", "ab\n"):
        reg.record({"event": "llm", "model": model, "status": "error", "ms": 1})
    assert section(reg.render(), "toolnexus_llm_requests_total") == [
        'toolnexus_llm_requests_total{model="ab",status="error"} 1',
        'toolnexus_llm_requests_total{model="ab\\"",status="error"} 1',
        'toolnexus_llm_requests_total{model="ab\\n",status="error"} 1',
    ]


def test_llm_event_counts_requests_tokens_and_duration():
    reg = MetricsRegistry()
    reg.record({"event": "llm", "model": "m", "status": "ok", "ms": 120.0, "prompt_tokens": 10, "completion_tokens": 4})
    reg.record({"event": "llm", "model": "m", "status": "ok", "ms": 80.0, "prompt_tokens": 5, "completion_tokens": 1})
    text = reg.render()
    assert section(text, "toolnexus_llm_requests_total") == ['toolnexus_llm_requests_total{model="m",status="ok"} 2']
    assert section(text, "toolnexus_llm_tokens_total") == [
        'toolnexus_llm_tokens_total{type="completion"} 5',
        'toolnexus_llm_tokens_total{type="prompt"} 15',
    ]
    assert section(text, "toolnexus_llm_request_duration_seconds") == hist_lines(
        "toolnexus_llm_request_duration_seconds", 'model="m"', [0, 1, 2, 2, 2, 2, 2, 2, 2, 2], 2, "0.2"
    )


def test_llm_token_series_exist_at_zero_once_an_ok_event_was_seen():
    reg = MetricsRegistry()
    reg.record({"event": "llm", "model": "m", "status": "ok", "ms": 1, "prompt_tokens": 0, "completion_tokens": 0})
    assert section(reg.render(), "toolnexus_llm_tokens_total") == [
        'toolnexus_llm_tokens_total{type="completion"} 0',
        'toolnexus_llm_tokens_total{type="prompt"} 0',
    ]


def test_llm_error_counts_a_request_and_duration_but_no_tokens():
    reg = MetricsRegistry()
    reg.record({"event": "llm", "model": "m", "status": "error", "ms": 5, "prompt_tokens": 0, "completion_tokens": 0})
    text = reg.render()
    assert section(text, "toolnexus_llm_requests_total") == ['toolnexus_llm_requests_total{model="m",status="error"} 1']
    assert section(text, "toolnexus_llm_tokens_total") == []
    assert 'toolnexus_llm_request_duration_seconds_count{model="m"} 1' in text


def test_floats_render_via_repr_and_integral_values_without_a_point():
    reg = MetricsRegistry()
    reg.record(
        {"event": "llm", "model": "m", "status": "ok", "ms": 0.01, "prompt_tokens": 2.0, "completion_tokens": 1.5}
    )
    text = reg.render()
    assert f'toolnexus_llm_request_duration_seconds_sum{{model="m"}} {0.01 / 1000!r}' in text  # 1e-05
    assert 'toolnexus_llm_tokens_total{type="prompt"} 2\n' in text
    assert 'toolnexus_llm_tokens_total{type="completion"} 1.5\n' in text


def test_run_errors_count_only_truthy_error():
    reg = MetricsRegistry()
    reg.record({"event": "run", "model": "m", "turns": 1, "tool_calls": 0, "total_tokens": 3, "ms": 9})
    reg.record({"event": "run", "model": "m", "error": "", "ms": 9})
    reg.record({"event": "run", "model": "m", "error": None, "ms": 9})
    assert section(reg.render(), "toolnexus_run_errors_total") == []
    reg.record({"event": "run", "model": "m", "error": "LLM 500", "ms": 9})
    reg.record({"event": "run", "model": "m", "error": "run cancelled", "ms": 9})
    assert section(reg.render(), "toolnexus_run_errors_total") == ['toolnexus_run_errors_total{model="m"} 2']


def test_unknown_events_and_unknown_keys_are_ignored():
    reg = MetricsRegistry()
    reg.record({"event": "something_else", "model": "m"})
    reg.record({"model": "m"})
    assert reg.render() == "\n".join(HEADERS) + "\n"
    reg.record(
        {
            "event": "llm",
            "model": "m",
            "status": "ok",
            "ms": 1,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "attempts": 3,
            "parts": [{"type": "image", "mimeType": "image/png", "bytes": 8}],
        }
    )
    assert section(reg.render(), "toolnexus_llm_requests_total") == [
        'toolnexus_llm_requests_total{model="m",status="ok"} 1'
    ]


def test_missing_or_non_numeric_fields_count_as_zero_instead_of_failing_the_run():
    reg = MetricsRegistry()
    reg.record({"event": "tool", "tool": "t"})
    reg.record({"event": "llm", "status": "ok", "ms": "slow", "prompt_tokens": None})
    text = reg.render()
    assert 'toolnexus_tool_calls_total{tool="t",source="",is_error="false",pending="false"} 1' in text
    assert 'toolnexus_llm_requests_total{model="",status="ok"} 1' in text
    assert 'toolnexus_llm_tokens_total{type="prompt"} 0' in text
    assert 'toolnexus_llm_request_duration_seconds_bucket{model="",le="0.05"} 1' in text


def test_record_is_thread_safe_under_concurrent_writers():
    reg = MetricsRegistry()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(500):
            reg.record({"event": "tool", "tool": "t", "source": "s", "is_error": False, "ms": 1})
            reg.record(
                {"event": "llm", "model": "m", "status": "ok", "ms": 1, "prompt_tokens": 1, "completion_tokens": 2}
            )

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text = reg.render()
    assert 'toolnexus_tool_calls_total{tool="t",source="s",is_error="false",pending="false"} 4000' in text
    assert 'toolnexus_tool_duration_seconds_count{tool="t"} 4000' in text
    assert 'toolnexus_llm_tokens_total{type="prompt"} 4000' in text
    assert 'toolnexus_llm_tokens_total{type="completion"} 8000' in text
