"""One request's story in one arrangement, in words: where its time went and why it was late.

`story_facts` gathers every number the story tells from the run's frames (`requests`,
`iterations`, `reads`), its freeze rows (`blame`: the rows of `freezes.csv`) and verdicts,
unchanged; `story_text` only words and rounds them, so the story and the CSVs always agree.
"""

from __future__ import annotations

import re
import textwrap

import numpy as np
import pandas as pd

from ..units import NS_PER_S
from .blame import CAUSES, reply_freezes

#: blamed prompts named in one phrase before "and N more"
N_NAMED = 2
#: freezes told one by one before "and N more"
N_FREEZES_TOLD = 4


def story_facts(result, arrangement: str, request_id: int) -> dict:
    """The numbers of request `request_id`'s story in `arrangement` (a measured request)."""
    req = result.requests
    row = req[(req["arrangement"] == arrangement) & (req["request_id"] == request_id)].iloc[0]
    gaps = result.gaps[arrangement]
    at = int(np.searchsorted(gaps.rows, request_id))
    it = result.iterations[result.iterations["arrangement"] == arrangement]
    reads = result.reads[result.reads["arrangement"] == arrangement]
    blame = result.blame[arrangement]
    _, rows = reply_freezes(result.records[arrangement], gaps, blame, np.array([request_id]))
    facts = {k: _plain(row[k]) for k in row.index if k != "arrangement"}
    facts["arrangement"] = arrangement
    facts["finished"] = bool(gaps.finished[at])
    facts["late_first_word"] = bool(gaps.late_first_word[at])
    facts["late_mean_gap"] = bool(gaps.late_mean_gap[at])
    facts["froze"] = bool(gaps.froze[at])
    slo = result.scenario.slo
    for key, late, figure in (("late_e2e", gaps.late_e2e, gaps.e2e_ns), ("late_delay", gaps.late_delay, gaps.delay_ns)):
        facts[key] = bool(late[at]) if late is not None else False
        facts[key[5:] + "_s"] = int(figure[at]) / NS_PER_S if figure is not None and figure[at] >= 0 else None
    facts["tpot_inclusive"] = slo.tpot == "inclusive"
    facts["limits"] = {"first_word_s": slo.first_word_s, "mean_gap_ms": slo.mean_gap_ms, "freeze_ms": slo.freeze_ms,
                       "e2e_s": slo.e2e_s, "delay_s": slo.delay_s}

    # what its reading GPU was busy with while it queued, and what it read alongside it
    gpu = row["reading_gpu"]
    on_gpu = it[it["gpu"] == gpu] if pd.notna(gpu) else it.iloc[:0]
    start = row["read_started_at_s"]
    if pd.notna(start):
        busy = on_gpu[(on_gpu["ended_at_s"] > row["arrived_at_s"]) & (on_gpu["started_at_s"] < start)]
        facts["queued_behind"] = _prompts_read(reads, gpu, busy["iteration"], exclude=request_id)
    else:
        facts["queued_behind"] = []
    mine = reads[(reads["gpu"] == gpu) & (reads["request_id"] == request_id)]
    facts["n_read_iterations"] = len(mine)
    facts["read_with"] = _prompts_read(reads, gpu, mine["iteration"], exclude=request_id)

    told = []
    for i in rows.tolist():
        code = int(blame.blamed[i])
        item = {"gap_started_at_s": blame.started_at_ns[i] / NS_PER_S, "gap_s": blame.gap_ns[i] / NS_PER_S,
                "cause": CAUSES[blame.cause[i]], "writing_gpu": int(blame.gpu[i]),
                "blamed": _blamed(blame.blamed_ids[code], blame.blamed_tokens[code]) if code >= 0 else []}
        if item["cause"] == "many_replies":
            w = it[(it["gpu"] == blame.gpu[i]) & (it["iteration"] == blame.iteration[i])]
            item["n_replies_written"] = int(w["n_replies_written"].iloc[0]) if len(w) else None
        told.append(item)
    facts["freezes"] = told
    return facts


def _plain(value):
    """A frame cell as plain Python (None for an empty cell)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, np.generic) else value


def _prompts_read(reads: pd.DataFrame, gpu, iterations: pd.Series, exclude: int) -> list[tuple[int, int]]:
    """(request id, tokens) read by `gpu` in `iterations`, summed per prompt, most tokens first."""
    r = reads[(reads["gpu"] == gpu) & reads["iteration"].isin(iterations) & (reads["request_id"] != exclude)]
    tokens = r.groupby("request_id")["n_tokens"].sum()
    order = sorted(tokens.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(int(k), int(v)) for k, v in order]


def _blamed(ids: str, tokens: str) -> list[tuple[int, int]]:
    return [(int(i), int(t)) for i, t in zip(str(ids).split(";"), str(tokens).split(";"))]


# -- words -----------------------------------------------------------------------------------


def seconds_text(s: float) -> str:
    """A time in seconds as the story shows it: 2 decimals, 3 below 0.1 s."""
    return f"{s:.3f} s" if abs(s) < 0.1 else f"{s:.2f} s"


def ms_text(ms: float) -> str:
    return f"{ms:.1f} ms"


def _prompts_text(prompts: list[tuple[int, int]]) -> str:
    named = [f"request {i} ({t:,} tokens)" for i, t in prompts[:N_NAMED]]
    rest = prompts[N_NAMED:]
    if rest:
        named.append(f"{len(rest)} more prompt{'s' * (len(rest) != 1)} ({sum(t for _, t in rest):,} tokens)")
    return " and ".join(named) if len(named) <= 2 else ", ".join(named[:-1]) + " and " + named[-1]


def _freeze_text(f: dict, facts: dict) -> str:
    head = f"frozen {seconds_text(f['gap_s'])} at {seconds_text(f['gap_started_at_s'])}"
    gpu = f["writing_gpu"]
    if f["cause"] == "prompt_read":
        return f"{head} while GPU {gpu} read {_prompts_text(f['blamed'])}"
    if f["cause"] == "kv_ship":
        waited = _waits_text(facts)
        return f"{head}, most of it getting its KV cache across ({seconds_text(facts['shipping_s'])}" + (
            f": {waited})" if waited else ")")
    if f["cause"] == "join_wait":
        return f"{head}, most of it waiting to join GPU {gpu} and for its first iteration there"
    if f["cause"] == "batch_full":
        return f"{head}, waiting for a seat in GPU {gpu}'s full batch (max_batch_replies, max_batch_tokens)"
    if f["cause"] == "preempted":
        return f"{head}, preempted on GPU {gpu} for KV memory (E9) and waiting to come back"
    n = f.get("n_replies_written")
    return f"{head} while GPU {gpu} wrote {n:,} replies in one iteration" if n else f"{head} (GPU {gpu} writing)"


def _waits_text(facts: dict) -> str:
    """What the KV cache waited for before its ship (E4 memory, E5 the link), '' if nothing."""
    waits = [(facts.get(k) or 0.0, what) for k, what in (("handoff_wait_s", "memory"), ("link_wait_s", "the link"))]
    return ", ".join(f"waited {seconds_text(w)} for {what}" for w, what in waits if w > 0)


def _verdict(facts: dict) -> str:
    lim = facts["limits"]
    if facts["on_time"]:
        return "on time"
    if not facts["finished"]:
        if facts.get("dropped"):
            n = facts["n_preemptions"]
            return f"late: dropped after {n} preemption{'s' * (n != 1)} (more than max_preemptions, E9)"
        return "late: unfinished when the safety cap ended the run"
    why = []
    if facts["late_first_word"]:
        wait = facts["first_word_s"]
        why.append(f"first word after {seconds_text(wait)} (limit {lim['first_word_s']:g} s)" if wait is not None
                   else "no first word")
    if facts["late_mean_gap"] and facts.get("tpot_inclusive"):  # (TPOT with word 1: end-to-end / words)
        tpot = facts["e2e_s"] * 1e3 / facts["n_reply_words"]
        why.append(f"TPOT with word 1 {ms_text(tpot)} (limit {lim['mean_gap_ms']:g} ms)")
    elif facts["late_mean_gap"]:
        why.append(f"mean gap {ms_text(facts['mean_gap_ms'])} (limit {lim['mean_gap_ms']:g} ms)")
    if facts["froze"]:
        n = facts["n_freezes"]
        why.append(f"{'one freeze' if n == 1 else f'{n} freezes'} over {lim['freeze_ms']:g} ms")
    if facts.get("late_e2e"):
        why.append(f"end-to-end {seconds_text(facts['e2e_s'])} (limit {lim['e2e_s']:g} s)")
    if facts.get("late_delay"):
        why.append(f"delay {seconds_text(facts['delay_s'])} (limit {lim['delay_s']:g} s)")
    return "late: " + "; ".join(why)


def story_text(facts: dict, width: int = 100) -> str:
    """The story as a few lines wrapped at `width`: arrival, queue, reading, ship, join, writing,
    freezes, verdict."""
    lines = _story_lines(facts)
    def wrap(line: str) -> str:  # never between a number and its unit
        glued = _NUMBER_UNIT.sub("\\1\u00a0\\2", line)
        return textwrap.fill(glued, width, subsequent_indent="    ", break_on_hyphens=False).replace("\u00a0", " ")

    return "\n".join([lines[0], *(wrap(line) for line in lines[1:])])


_NUMBER_UNIT = re.compile(r"(\d) (s|ms|tokens)\b")


def _story_lines(facts: dict) -> list[str]:
    f = facts
    lines = [f"{f['arrangement']}: request {f['request_id']} ({f['n_prompt_tokens']:,}-token prompt, "
             f"{f['n_reply_words']:,}-word reply)"]
    parts = [f"arrived at {seconds_text(f['arrived_at_s'])}"]
    gpu = f["reading_gpu"]
    if f["queued_s"] is None:
        parts.append(f"still queued on GPU {gpu} when the run ended" if gpu is not None else "never routed")
        return [*lines, "  " + "; ".join(parts), "  " + _verdict(f)]
    behind = f" behind {_prompts_text(f['queued_behind'])}" if f["queued_behind"] else " for the iteration in progress"
    parts.append(f"queued {seconds_text(f['queued_s'])} on GPU {gpu}{behind}" if f["queued_s"] > 0
                 else f"read at once on GPU {gpu}")
    if f["reading_s"] is not None:
        chunks = f" in {f['n_read_iterations']} iterations" if f["n_read_iterations"] > 1 else ""
        along = f", along with {_prompts_text(f['read_with'])}" if f["read_with"] else ""
        cached = f" (its first {f['cached_tokens']:,} tokens were cached, not read)" if f.get("cached_tokens") else ""  # E13
        parts.append(f"read in {seconds_text(f['reading_s'])}{chunks}{along}{cached}")
        parts.append(f"first word at {seconds_text(f['first_word_at_s'])} ({seconds_text(f['first_word_s'])} after arrival)")
    lines.append("  " + "; ".join(parts))
    parts = []
    if f["n_reply_words"] > 1 and f["reading_s"] is not None:
        wgpu = f["writing_gpu"]
        if wgpu is not None and wgpu != gpu:
            ship = f["shipping_s"]
            waited = _waits_text(f)
            if ship is None:
                parts.append(f"shipping to GPU {wgpu}")
            elif waited:
                parts.append(f"its KV cache reached GPU {wgpu} in {seconds_text(ship)} ({waited})")
            else:
                parts.append(f"shipped in {seconds_text(ship)} to GPU {wgpu}")
            if f["joining_s"] is not None:
                parts.append(f"waited {seconds_text(f['joining_s'])} for its first iteration there")
        elif wgpu is not None:
            parts.append(f"written on GPU {wgpu}, where it was read")
        if f["writing_s"] is not None:
            parts.append(f"wrote words 2-{f['n_reply_words']:,} in {seconds_text(f['writing_s'])} "
                         f"(mean gap {ms_text(f['mean_gap_ms'])}, longest {ms_text(f['max_gap_ms'])})"
                         + (f", {seconds_text(f['frozen_s'])} of it frozen" if f["frozen_s"] else ", never frozen"))
    if parts:
        lines.append("  " + "; ".join(parts))
    for fz in f["freezes"][:N_FREEZES_TOLD]:
        lines.append("  " + _freeze_text(fz, f))
    rest = f["freezes"][N_FREEZES_TOLD:]
    if rest:
        lines.append(f"  and {len(rest)} more freeze{'s' * (len(rest) != 1)} ({seconds_text(sum(x['gap_s'] for x in rest))} in all)")
    if f["finished_at_s"] is not None:
        total = f["finished_at_s"] - f["arrived_at_s"]
        lines.append(f"  last word at {seconds_text(f['finished_at_s'])} ({seconds_text(total)} after arrival); {_verdict(f)}")
    else:
        lines.append("  " + _verdict(f))
    return lines
