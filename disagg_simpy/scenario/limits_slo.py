"""The on-time limits (M7) and the figures published elsewhere for a scenario (`reference`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .base import Name, Seconds, _Strict
from .limits import MAX_ARRANGEMENTS, MAX_MEAN_GAP_MS, MAX_TIME_S


class Slo(_Strict):
    """On-time limits (M7); any of them may be null (off), not all. `criterion` says how they
    judge a run: `per_request` (a request is on time when it meets every limit that is on; the
    share on time is compared with a target) or `percentiles` (a run meets the limits when the
    `percentile`-th percentile of each quantity whose limit is on meets it, as simdistserve's
    search does)."""

    first_word_s: Seconds | None = 2.0
    mean_gap_ms: Annotated[float, Field(gt=0, le=MAX_MEAN_GAP_MS)] | None = 50.0
    freeze_ms: Annotated[float, Field(gt=0, le=MAX_TIME_S * 1e3)] | None = 250.0
    criterion: Literal["per_request", "percentiles"] = "per_request"
    percentile: Annotated[float, Field(gt=0, lt=100)] | None = None

    @model_validator(mode="after")
    def _check(self) -> Slo:
        if self.first_word_s is None and self.mean_gap_ms is None and self.freeze_ms is None:
            raise ValueError("got every limit null (first_word_s, mean_gap_ms, freeze_ms), expected at least one limit")
        if self.percentile is not None and self.criterion != "percentiles":
            raise ValueError(f"@percentile: got {self.percentile:g} with criterion {self.criterion!r}, "
                             "expected criterion: percentiles")
        return self

    @property
    def on(self) -> dict[str, float]:
        """The limits that are on, by key, in order."""
        keys = ("first_word_s", "mean_gap_ms", "freeze_ms")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    @property
    def level(self) -> float:
        """The percentile of the `percentiles` criterion (default 90)."""
        return 90.0 if self.percentile is None else self.percentile

    def words(self) -> str:
        """The limits that are on, in words: 'first word within 2 s, mean gap within 50 ms, no
        gap over 250 ms' (and the criterion when it is percentiles)."""
        parts = {"first_word_s": "first word within {:g} s", "mean_gap_ms": "mean gap within {:g} ms",
                 "freeze_ms": "no gap over {:g} ms"}
        text = ", ".join(parts[k].format(v) for k, v in self.on.items())
        if self.criterion == "percentiles":
            text = f"P{self.level:g} of each: " + text.replace("no gap over", "longest gap within")
        return text

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
