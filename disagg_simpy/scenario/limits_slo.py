"""The on-time limits (M7), the field's SLO rules as named presets, and the figures published
elsewhere for a scenario (`reference`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import Field, model_validator

from .base import Name, Seconds, _Strict
from .limits import MAX_ARRANGEMENTS, MAX_MEAN_GAP_MS, MAX_TIME_S

#: Every limit key, in the order tables and words give them: first-word wait (TTFT), mean gap
#: (TPOT), no gap over (freeze), every gap of every reply (TBT/ITL, percentiles only),
#: arrival to last word (end-to-end latency), arrival to first read (scheduling delay).
LIMIT_KEYS = ("first_word_s", "mean_gap_ms", "freeze_ms", "gap_ms", "e2e_s", "delay_s")
Percent = Annotated[float, Field(gt=0, lt=100)]
GapMs = Annotated[float, Field(gt=0, le=MAX_TIME_S * 1e3)]
_OFF = {"first_word_s": None, "mean_gap_ms": None, "freeze_ms": None}

#: Named SLO rules (`slo: {preset: NAME}`), each with its values and where they come from
#: (docs/compare.md quotes each source's definition). Keys written beside `preset` override them.
SLO_PRESETS: dict[str, dict[str, Any]] = {
    "distserve": {**_OFF, "first_word_s": 0.25, "mean_gap_ms": 100.0, "criterion": "per_request",
                  "source": "DistServe (Zhong et al., OSDI 2024), section 6.1 and Table 1: SLO attainment = share of "
                            "requests meeting both TTFT and TPOT (chatbot, OPT-13B: 0.25 s and 0.1 s); goodput at 90%"},
    "vllm-bench": {**_OFF, "criterion": "per_request", "tpot": "exclusive",
                   "source": "vLLM benchmarks/benchmark_serving.py --goodput ttft:MS tpot:MS e2el:MS: a request is good "
                             "when each given metric is within its value; TPOT excludes the first token; no defaults "
                             "(write first_word_s, mean_gap_ms and/or e2e_s)"},
    "sarathi-serve": {**_OFF, "gap_ms": 200.0, "delay_s": 2.0, "criterion": "percentiles", "percentile": 99,
                      "percentile_of": {"delay_s": 50},
                      "source": "Sarathi-Serve (Agrawal et al., OSDI 2024), section 5: capacity = the highest load whose "
                                "P99 time between tokens stays under the SLO while the median scheduling delay stays "
                                "under 2 s (0.2 s: its strict TBT SLO for the 34B/70B models)"},
    "mlperf-llama2-70b-server": {**_OFF, "first_word_s": 2.0, "mean_gap_ms": 200.0, "criterion": "percentiles",
                                 "percentile": 99, "tpot": "exclusive",
                                 "source": "MLPerf Inference rules, llama2-70b Server scenario: P99 TTFT <= 2000 ms and "
                                           "P99 TPOT <= 200 ms"},
    "mlperf-llama2-70b-interactive": {**_OFF, "first_word_s": 0.45, "mean_gap_ms": 40.0, "criterion": "percentiles",
                                      "percentile": 99, "tpot": "exclusive",
                                      "source": "MLPerf Inference rules, llama2-70b-interactive: P99 TTFT <= 450 ms and "
                                                "P99 TPOT <= 40 ms"},
}
PRESET_NAMES = tuple(SLO_PRESETS)
if TYPE_CHECKING:  # (mypy cannot read a Literal built at import; the schema below is pydantic's)
    PresetName: TypeAlias = str
    LimitKey: TypeAlias = str
else:  # one definition each: the names of SLO_PRESETS and LIMIT_KEYS, as the schema's choices
    PresetName = Literal[PRESET_NAMES]
    LimitKey = Literal[LIMIT_KEYS]

#: The field's name of each judged quantity, and its unit, for the rule's words.
_FIELD = {"first_word_s": ("TTFT", "s"), "mean_gap_ms": ("TPOT", "ms"), "freeze_ms": ("longest gap", "ms"),
          "gap_ms": ("TBT", "ms"), "e2e_s": ("end-to-end", "s"), "delay_s": ("delay", "s")}


class Slo(_Strict):
    """On-time limits (M7); any of them may be null (off), not all. `criterion` says how they
    judge a run: `per_request` (a request is on time when it meets every limit that is on; the
    share on time is compared with a target) or `percentiles` (a run meets the limits when the
    `percentile`-th percentile of each quantity whose limit is on meets it, as simdistserve's
    search does; `percentile_of` gives one limit its own percentile, e.g. a median delay).
    `preset` starts from a named rule of the field (SLO_PRESETS); keys written beside it win."""

    preset: PresetName | None = None
    first_word_s: Seconds | None = 2.0
    mean_gap_ms: Annotated[float, Field(gt=0, le=MAX_MEAN_GAP_MS)] | None = 50.0
    freeze_ms: GapMs | None = 250.0
    gap_ms: GapMs | None = None
    e2e_s: Seconds | None = None
    delay_s: Seconds | None = None
    tpot: Literal["exclusive", "inclusive"] = "exclusive"
    criterion: Literal["per_request", "percentiles"] = "per_request"
    percentile: Percent | None = None
    percentile_of: dict[LimitKey, Percent] | None = None

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        """A named rule's values under the keys written beside it; a limit turned off there
        (`delay_s: null`) also leaves the rule's `percentile_of` (unless that is written too)."""
        if isinstance(data, dict) and isinstance(data.get("preset"), str) and data["preset"] in SLO_PRESETS:
            values = {k: v for k, v in SLO_PRESETS[data["preset"]].items() if k != "source"}
            if isinstance(values.get("percentile_of"), dict) and "percentile_of" not in data:
                kept = {k: v for k, v in values["percentile_of"].items() if not (k in data and data[k] is None)}
                values["percentile_of"] = kept or None
            return values | data
        return data

    @model_validator(mode="after")
    def _check(self) -> Slo:
        if not self.on:
            raise ValueError("got every limit null (" + ", ".join(LIMIT_KEYS) + "), expected at least one limit"
                             + (f" (preset {self.preset} sets none: write the ones to judge)" if self.preset else ""))
        if self.percentile is not None and self.criterion != "percentiles":
            raise ValueError(f"@percentile: got {self.percentile:g} with criterion {self.criterion!r}, "
                             "expected criterion: percentiles")
        if self.percentile_of is not None and self.criterion != "percentiles":
            raise ValueError(f"@percentile_of: got it with criterion {self.criterion!r}, expected criterion: percentiles")
        if self.gap_ms is not None and self.criterion != "percentiles":
            raise ValueError(f"@gap_ms: got {self.gap_ms:g} with criterion {self.criterion!r}, expected criterion: "
                             "percentiles (a percentile of every gap of every reply); per request, freeze_ms limits "
                             "each reply's every gap")
        for key in self.percentile_of or {}:
            if getattr(self, key) is None:
                raise ValueError(f"@percentile_of: got {key} whose limit is off, expected a key whose limit is on "
                                 f"({', '.join(self.on) or 'none'})")
        return self

    def with_preset(self, name: str) -> dict[str, Any]:
        """This rule's block with `preset: name` written in it: the named rule's values under the
        keys this rule sets apart from where it starts (its own preset's values, or the defaults),
        as a file that writes `preset: name` beside them gets; what `--set slo.preset=NAME` means."""
        start = {k: f.default for k, f in type(self).model_fields.items()}
        if self.preset is not None:
            start |= {k: v for k, v in SLO_PRESETS[self.preset].items() if k != "source"}
        return {"preset": name} | {k: v for k, v in self.model_dump(mode="python").items()
                                   if k != "preset" and v != start.get(k)}

    @property
    def on(self) -> dict[str, float]:
        """The limits that are on, by key, in order."""
        return {k: getattr(self, k) for k in LIMIT_KEYS if getattr(self, k) is not None}

    @property
    def level(self) -> float:
        """The percentile of the `percentiles` criterion (default 90)."""
        return 90.0 if self.percentile is None else self.percentile

    def level_of(self, key: str) -> float:
        """The percentile that judges limit `key` (its own in `percentile_of`, else `level`)."""
        own = {str(k): v for k, v in (self.percentile_of or {}).items()}
        return own.get(key, self.level)

    @property
    def is_default_kind(self) -> bool:
        """Whether the rule is the explainer's kind (per request, TTFT, TPOT exclusive and freezes
        only), which tables and pictures call "on time"."""
        return (self.preset is None and self.criterion == "per_request" and self.tpot == "exclusive"
                and self.e2e_s is None and self.delay_s is None)

    def words(self) -> str:
        """The limits that are on, in words: 'first word within 2 s, mean gap within 50 ms, no
        gap over 250 ms' (the explainer's kind); the field's words otherwise: 'P99 TBT <= 0.2 s
        and median delay <= 2 s', 'TTFT <= 0.25 s and TPOT <= 100 ms per request'."""
        if self.is_default_kind:
            parts = {"first_word_s": "first word within {:g} s", "mean_gap_ms": "mean gap within {:g} ms",
                     "freeze_ms": "no gap over {:g} ms"}
            return ", ".join(parts[k].format(v) for k, v in self.on.items())
        out = []
        for key, limit in self.on.items():
            name, unit = _FIELD[key]
            if key == "mean_gap_ms" and self.tpot == "inclusive":
                name = "TPOT (first word included)"
            if key == "gap_ms" and unit == "ms" and limit >= 100:
                text = f"{name} <= {limit / 1e3:g} s"
            else:
                text = f"{name} <= {limit:g} {unit}"
            if self.criterion == "percentiles":
                q = self.level_of(key)
                text = ("median " if q == 50 else f"P{q:g} ") + text
            out.append(text)
        text = out[0] if len(out) == 1 else ", ".join(out[:-1]) + " and " + out[-1]
        return text + (" per request" if self.criterion == "per_request" else "")

    def verdict(self) -> str:
        """What meeting the rule is called: 'on time' for the explainer's kind, else 'meets RULE'."""
        return "on time" if self.is_default_kind else f"meets {self.words()}"

    def share_header(self) -> str:
        """A table header for the share of requests `on_time_pct` holds: 'on time %' for the
        explainer's kind, 'meet rule %' for another per-request rule, and 'within limits %' under
        the percentiles criterion (each request within every limit: not what the rule judges)."""
        if self.criterion == "percentiles":
            return "within limits %"
        return "on time %" if self.is_default_kind else "meet rule %"

    def carried_text(self) -> str:
        """How a goodput is carried, for an axis: 'with the target share on time', 'with the
        target share meeting the rule', or 'meeting P99 TBT <= 0.2 s and median delay <= 2 s'."""
        if self.criterion == "percentiles":
            return f"meeting {self.words()}"
        return "with the target share on time" if self.is_default_kind else "with the target share meeting the rule"

    def share_words(self) -> str:
        """What a per-request share curve shows: 'replies on time', 'requests meeting TTFT <= ...
        per request', or 'requests within every limit' (the percentiles criterion judges whole
        runs: its per-request share is shown, not its verdict)."""
        if self.criterion == "percentiles":
            return "requests within every limit"
        return "replies on time" if self.is_default_kind else f"requests meeting {self.words().removesuffix(' per request')}"

    def criterion_text(self, target: float) -> str:
        """What a search's pass means: '90% on time (per request: first word within 2 s, ...)',
        '90% of requests meet TTFT <= 0.25 s and TPOT <= 100 ms', or 'P99 TBT <= 0.2 s and
        median delay <= 2 s (percentiles of each run, mean over seeds)'."""
        if self.criterion == "percentiles":
            return f"{self.words()} (percentiles of each run, mean over seeds)"
        if self.is_default_kind:
            return f"{target:g}% on time (per request: {self.words()})"
        return f"{target:g}% of requests meet {self.words().removesuffix(' per request')}"

    def at_text(self, target: float) -> str:
        """The rule an answer is found at: 'at 90% on time', 'with 90% of requests meeting TTFT
        <= 0.25 s and TPOT <= 100 ms', 'meeting P99 TBT <= 0.2 s and median delay <= 2 s'."""
        if self.criterion == "percentiles":
            return f"meeting {self.words()}"
        if self.is_default_kind:
            return f"at {target:g}% on time"
        return f"with {target:g}% of requests meeting {self.words().removesuffix(' per request')}"

    def scaled(self, factor: float) -> dict:
        """The limits that are on, each multiplied by `factor` (an SLO scale), as overrides."""
        return {f"slo.{k}": v * factor for k, v in self.on.items()}


class Reference(_Strict):
    """Figures published for this scenario elsewhere (e.g. the explainer page the default scenario
    reproduces), drawn beside ours: `summary.png`'s diamonds, for the arrangements it names that
    the scenario has. Only a scenario that declares them shows them; `source` says where they
    come from."""

    source: str = Field(min_length=1, max_length=200)
    on_time_pct: dict[Name, float] = Field(min_length=1, max_length=MAX_ARRANGEMENTS)  # 0-100: Scenario checks
