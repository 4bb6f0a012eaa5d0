"""The request lengths of DistServe's Figures 8-9 workloads as the project can state them: histograms
for scenarios/validation/distserve-fig*.yaml (prompt tokens and reply words, drawn independently).

- ShareGPT (chatbot, Figure 8): the public ShareGPT lengths (Sarathi-Serve's
  sharegpt_8k_filtered_stats_llama2_tokenizer.csv, Apache-2.0, from $DISAGG_SIMPY_TRACES) kept
  where prompt + reply < 2,048 tokens, DistServe's own filter (evaluation/2-benchmark-serving/
  0-prepare-dataset.py: OPT has 2,048 positions). DistServe tokenised with OPT's tokenizer and took
  a random number of turns as the prompt; these rows are Llama-2 tokens of whole conversations.
- HumanEval (code completion, Figure 9(a)): openai/human-eval's data/HumanEval.jsonl (MIT): prompt
  = `prompt`, reply = `canonical_solution`, as DistServe's script takes them. Token counts are an
  estimate: the pieces of GPT-2's pre-tokenizer (OPT uses GPT-2's BPE), a word of more than 7
  letters counted as one token a 7 letters, every whitespace character of a run one token (GPT-3's
  tokenizer, the same BPE, spends most of its waste on code's whitespace: Chen et al., Evaluating
  Large Language Models Trained on Code, arXiv 2107.03374, on why Codex added whitespace tokens),
  plus OPT's start token; OPT's tokenizer itself is not available here, so the counts are not
  checked against it (counting a run as one token instead gives prompts of 132 and replies of 56
  on average, against 170 and 95).

    DISAGG_SIMPY_TRACES=/work/shared/data/traces python benchmarks/distserve_lengths.py [HumanEval.jsonl]
"""

from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pandas as pd

from disagg_simpy.workload.catalog import CATALOG, cached_path

#: GPT-2's pre-tokenizer pattern, with Python's classes (letters: [^\W\d_]; '_' is punctuation there)
PIECES = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")
#: DistServe's filter: prompt + reply below OPT's 2,048 positions
OPT_POSITIONS = 2048


def approx_tokens(text: str) -> int:
    """Estimated OPT (GPT-2 BPE) tokens of `text`: pre-tokenizer pieces, long words split every 7
    letters, a whitespace run one token a character, plus the start token OPT's tokenizer adds."""
    return 1 + sum(len(p) if p.isspace() else max(1, math.ceil(len(p.strip()) / 7)) for p in PIECES.findall(text))


def histogram(values: np.ndarray, width: int) -> dict:
    """Bins of `width` from 1 (half-open, as the scenario's histogram reads them), empty bins at the
    ends dropped; weights are counts."""
    edges = np.arange(1, int(values.max()) + width + 1, width)
    counts, _ = np.histogram(values, bins=edges)
    used = np.nonzero(counts)[0]
    lo, hi = used[0], used[-1] + 1
    return {"edges": [int(e) for e in edges[lo:hi + 1]], "weights": [int(c) for c in counts[lo:hi]]}


def show(name: str, prompts: np.ndarray, replies: np.ndarray, width: int) -> None:
    print(f"# {name}: {len(prompts)} requests; prompt tokens mean {prompts.mean():.0f}, median {np.median(prompts):.0f}, "
          f"max {prompts.max()}; reply words mean {replies.mean():.0f}, median {np.median(replies):.0f}, max {replies.max()}")
    print("prompt:", json.dumps({"histogram": histogram(prompts, width)}))
    print("reply:", json.dumps({"histogram": histogram(replies, width)}))


def main(argv: list[str]) -> int:
    path = cached_path(CATALOG["sharegpt"])
    if path is None:
        print("distserve_lengths: the public trace sharegpt is not cached; point DISAGG_SIMPY_TRACES at it or run: "
              "python -m disagg_simpy traces fetch sharegpt", file=sys.stderr)
        return 2
    table = pd.read_csv(path)
    kept = table[table.num_prefill_tokens + table.num_decode_tokens < OPT_POSITIONS]
    show("ShareGPT, prompt + reply < 2,048 tokens", kept.num_prefill_tokens.to_numpy(),
         kept.num_decode_tokens.to_numpy(), 64)
    if argv:
        rows = [json.loads(line) for line in open(argv[0], encoding="utf-8") if line.strip()]
        pairs = [(approx_tokens(r["prompt"]), approx_tokens(r["canonical_solution"])) for r in rows]
        pairs = [(p, r) for p, r in pairs if p + r < OPT_POSITIONS]
        show("HumanEval (estimated OPT tokens)", np.array([p for p, _ in pairs]), np.array([r for _, r in pairs]), 16)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
