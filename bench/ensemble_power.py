"""How often the gate's tests catch a real regression: paired McNemar against unpaired Fisher.

    python bench/ensemble_power.py [REPS]

Simulates the situation the gate is for: n = 500 questions, a single-model baseline right 70 % of the
time, a strategy 3 points worse, the two answers to a question agreeing except on a fraction of
questions (the discordant ones, 10 % and 20 % here, as consensus answers mostly agree with the single
answer). Each replicate goes through the gate's own ``compare`` (one-sided tests at α = 0.10, one
comparison, so no Holm); prints how often each test detects the drop, and how often each fires with no
drop at all (the false-alarm rate, which should stay near 10 %).
"""

from __future__ import annotations

import random
import sys
import time

from shaberi.ensemble.gate import ALPHA, compare


def replicate(rng: random.Random, n: int, base: float, drop: float, discordant: float) -> tuple[list[int], list[int]]:
    lost, gained = (discordant + drop) / 2, (discordant - drop) / 2  # P(b right, s wrong), P(b wrong, s right)
    baseline, strategy = [], []
    for _ in range(n):
        b = rng.random() < base
        flip = rng.random() < (lost / base if b else gained / (1 - base))
        baseline.append(int(b))
        strategy.append(int(b != flip))
    return baseline, strategy


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = random.Random(0)
    started = time.perf_counter()
    print(f"n = 500, baseline 70 %, one-sided α = {ALPHA}, {reps} replicates each")
    for discordant in (0.10, 0.20):
        for drop in (0.03, 0.0):
            mcnemar = fisher = 0
            for _ in range(reps):
                baseline, strategy = replicate(rng, 500, 0.70, drop, discordant)
                c = compare("sim", "s", baseline, strategy, [float(b) for b in baseline])
                mcnemar += c.p_mcnemar < ALPHA
                fisher += c.p_fisher < ALPHA
            what = f"a {100 * drop:.0f}-point drop" if drop else "no drop (false alarms)"
            print(f"  {100 * discordant:.0f} % discordant, {what:<24} McNemar {mcnemar / reps:6.1%}   "
                  f"Fisher {fisher / reps:6.1%}")
    print(f"{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
