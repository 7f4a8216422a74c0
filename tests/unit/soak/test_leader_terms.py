"""The leader's RSS per term in the soak's report: where memory grows (within a term, or
at a hand-over) is the first thing to know about a soak whose RSS is not flat."""

from __future__ import annotations

import pytest

from scheduler.soak.run import Sample, leader_terms

MiB = 2**20


def sample(t: float, leader: str, **rss: int) -> Sample:
    return Sample(t, {k.replace("_", "-"): v * MiB for k, v in rss.items()}, 0, 0, 0, leader)


@pytest.mark.parametrize(("samples", "expected"), [
    ([], []),
    # one term, warm after 60 s
    ([sample(0, "r-0#1", r_0=90), sample(30, "r-0#1", r_0=95), sample(60, "r-0#1", r_0=100),
      sample(90, "r-0#1", r_0=104)],
     [("r-0#1", 0, 90, 90, 100, 104)]),
    # a hand-over: the new leader's term starts with its own RSS; no leader in between
    ([sample(0, "r-0#1", r_0=90, r_1=80), sample(70, "r-0#1", r_0=99, r_1=81),
      sample(75, "", r_1=81), sample(80, "r-1#1", r_1=82), sample(100, "r-1#1", r_1=88)],
     [("r-0#1", 0, 70, 90, 99, 99), ("r-1#1", 80, 100, 82, None, 88)]),
    # the same replica's next process is another term
    ([sample(0, "r-0#1", r_0=90), sample(10, "r-0#2", r_0=70)],
     [("r-0#1", 0, 0, 90, None, 90), ("r-0#2", 10, 10, 70, None, 70)]),
    # a paused leader has no RSS sample: its term has none to report
    ([sample(0, "r-0#1", r_1=80)], []),
])
def test_leader_terms(samples: list[Sample],
                      expected: list[tuple[str, float, float, float, float | None, float]]
                      ) -> None:
    got = [(t["leader"], t["from_s"], t["to_s"], t["rss_start_mib"], t["rss_warm_mib"],
            t["rss_end_mib"]) for t in leader_terms(samples, warmup=60)]
    assert got == expected
