"""E16's scenario key (speculative decoding, docs/rules.md#e16): `speculative: {tokens, acceptance,
per_draft_token_ms}`, scenario-wide (every writing iteration of every arrangement), the options
it does not go with yet, and E8's budgets it needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from .base import CostMs, _Strict
from .limits import MAX_COST_MS

#: the most draft tokens an iteration may verify per reply (vLLM's num_speculative_tokens is single digits)
MAX_DRAFT_TOKENS = 64


#: what each of E16's keys takes, for one-line messages (scenario/loading.py), and `tokens` inside `speculative:`
E16_EXPECT = {
    "speculative": "a mapping like {tokens: 4, acceptance: 0.7} (E16), or null (off)",
    "acceptance": "a draft token's acceptance rate from 0 up to, not including, 1 (E16)",
    "per_draft_token_ms": f"a number of ms >= 0, up to {MAX_COST_MS:g} (E16)",
}
E16_TOKENS = f"a whole number of draft tokens from 1 to {MAX_DRAFT_TOKENS} (E16)"


class Speculative(_Strict):
    """E16: each writing iteration verifies `tokens` draft tokens per reply and writes 1 + the
    accepted ones (each accepted with probability `acceptance` while the ones before it were)."""

    tokens: Annotated[int, Field(ge=1, le=MAX_DRAFT_TOKENS)]
    acceptance: Annotated[float, Field(ge=0, lt=1)]
    per_draft_token_ms: CostMs = 0.0


class SpeculativeKeys(_Strict):
    """The checks of the scenario's E16 key (`Scenario.speculative`; a base of `Scenario`)."""

    if TYPE_CHECKING:
        speculative: Speculative | None  # (a field of `Scenario`, so its keys keep their order)

    @property
    def draft_tokens(self) -> int:
        """E16's k draft tokens a written reply verifies (0 without E16): E9's blocks hold them too (R106)."""
        return self.speculative.tokens if self.speculative is not None else 0

    def speculative_problem(self) -> str | None:
        """One line for a scenario that asks for E16 with a rule it does not go with yet, else None: E9 with E3
        (a resumed reply's context, docs/rules.md#r107; E9 alone goes, #r103), and a token budget of writing
        iterations (E8) too small for one reply with its draft tokens and one prompt token (#r84, #r102)."""
        if self.speculative is None:
            return None
        least = self.speculative.tokens + 2
        for i, a in enumerate(self.arrangements):  # type: ignore[attr-defined]  # (a Scenario's)
            where = f"@arrangements[{i}]"
            if getattr(a, "kv_policy", None) == "paged" and any(  # E9 with E16 goes (R103-R107), not with E3 too
                    c.per_context_token_ms for c in a.side_costs(self.cost)):  # type: ignore[attr-defined]
                return (f"{where}.kv_policy: got 'paged' with speculative (E16) and per_context_token_ms (E3), expected "
                        "two of the three: E3's context of a reply resumed after a preemption under speculative "
                        "decoding is not modelled yet (docs/rules.md#r107)")
            for key in ("max_batch_tokens", "writing_max_batch_tokens"):  # (a split's reading side writes nothing)
                budget = getattr(a, key, None)
                if budget is not None and budget < least and not (
                        key == "max_batch_tokens" and getattr(a, "writing_max_batch_tokens", None) is not None):
                    return (f"{where}.{key}: got {budget:,} with speculative tokens {self.speculative.tokens}, expected "
                            f"at least {least} (one reply written with its {self.speculative.tokens} draft tokens and "
                            "one prompt token read, E8 with E16: docs/rules.md#r84; raise it or lower speculative.tokens)")
        return None
