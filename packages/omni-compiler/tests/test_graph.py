"""Step 6: unknown references, cycles, reachability, terminals, fan-in."""

from __future__ import annotations

import pytest
from compiler_helpers import chain, compiled, only, paths, pipeline, stage, topology_error


@pytest.mark.parametrize("field", ["next", "stream_to", "wait_for"])
def test_unknown_reference_names_the_field_and_suggests(field):
    stages = chain("encoder", "vocoder")
    stages[0][field] = ["vocodr"] if field != "next" else ["vocoder", "vocodr"]
    if field == "wait_for":
        stages[0]["merge_fn"] = "m.x:merge"
    issue = only(topology_error(pipeline(stages)), f"stages.encoder.{field}")
    assert issue.rule == "references unknown stage 'vocodr'"
    assert issue.value == "vocodr"
    assert issue.fix.startswith("did you mean 'vocoder'?")


def test_unknown_entry_stage():
    issue = only(topology_error(pipeline(chain("a", "b"), entry_stage="c")), "entry_stage")
    assert issue.rule == "names no stage" and issue.value == "c"


def test_declared_entry_stage_changes_reachability():
    stages = chain("a", "b", "c")
    topology = compiled(pipeline(stages, entry_stage="a"))
    assert topology.entry_stage == "a"
    issue = only(topology_error(pipeline(stages, entry_stage="b")), "stages.a")
    assert issue.rule == "unreachable from the entry stage 'b'"


def test_duplicate_stage_names():
    stages = [stage("a", next="b"), stage("b", terminal=True), stage("a", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.a")
    assert "declared twice" in issue.rule


def test_two_stage_cycle_through_next():
    stages = [stage("a", next="b"), stage("b", next="a")]
    error = topology_error(pipeline(stages))
    cycle = only(error, "stages.b.next")
    assert cycle.rule == "the stages form a cycle (a -> b -> a), so a request could never finish"
    assert cycle.fix == "remove the edge b -> a"
    assert "stages" in paths(error)  # and, independently, no terminal is reachable


def test_self_loop():
    stages = [stage("a", next=["a", "b"]), stage("b", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.a.next")
    assert "(a -> a)" in issue.rule


def test_cycle_closed_by_stream_to_names_stream_to():
    stages = [stage("a", next="b"), stage("b", stream_to="a", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.b.stream_to")
    assert "(a -> b -> a)" in issue.rule and issue.fix == "remove the edge b -> a"


def test_cycle_closed_by_wait_for_names_the_waiting_stage():
    """a waits for b, so the edge b -> a comes from a's wait_for."""
    stages = [stage("a", next="b", wait_for="b", merge_fn="m.x:merge"), stage("b", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.a.wait_for")
    assert "(a -> b -> a)" in issue.rule and issue.fix == "remove the edge b -> a"


def test_two_independent_cycles_are_both_reported():
    stages = [
        stage("a", next=["b", "d"]), stage("b", next="c"), stage("c", next="b"),
        stage("d", next="e"), stage("e", next=["d", "f"]), stage("f", terminal=True),
    ]
    error = topology_error(pipeline(stages))
    cycles = [i for i in error.issues if "cycle" in i.rule]
    assert sorted(i.path for i in cycles) == ["stages.c.next", "stages.e.next"]


def test_unreachable_stage():
    stages = [*chain("a", "b"), stage("orphan", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.orphan")
    assert issue.rule == "unreachable from the entry stage 'a'"
    assert issue.value == "orphan"


def test_stream_to_makes_a_stage_reachable():
    stages = [stage("a", next="b", stream_to="c"), stage("b", terminal=True), stage("c", terminal=True)]
    assert compiled(pipeline(stages)).stage("c").terminal


def test_no_reachable_terminal():
    """The only terminal is unreachable: both problems are reported."""
    stages = [stage("a", next="b"), stage("b", next="c"), stage("c", next="b"), stage("end", terminal=True)]
    error = topology_error(pipeline(stages))
    issue = only(error, "stages")
    assert issue.rule == "no terminal stage is reachable from the entry stage 'a', so no request could complete"
    assert "stages.end" in paths(error)


def test_wait_for_without_merge_fn():
    stages = [stage("a", next=["b", "c"]), stage("b", next="d"), stage("c", next="d"), stage("d", wait_for=["b", "c"], terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.d.merge_fn")
    assert "waits for b, c but declares no merge_fn" in issue.rule


def test_fan_in_with_merge_fn_compiles():
    stages = [stage("a", next=["b", "c"]), stage("b", next="d"), stage("c", next="d"), stage("d", wait_for=["b", "c"], merge_fn="m.x:merge", terminal=True)]
    topology = compiled(pipeline(stages))
    assert topology.stage("d").wait_for == ("b", "c") and topology.stage("d").merge_fn == "m.x:merge"


def test_dead_end_stage():
    stages = [stage("a", next=["b", "c"]), stage("b"), stage("c", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.b.next")
    assert "neither passes its payload on (next) nor completes the request (terminal)" in issue.rule
    assert issue.fix == "add next: <stage> or terminal: true to b"


def test_stream_only_stage_is_a_dead_end():
    stages = [stage("a", next="b"), stage("b", stream_to="c"), stage("c", terminal=True)]
    assert "stages.b.next" in paths(topology_error(pipeline(stages)))


def test_terminal_stage_with_next():
    stages = [stage("a", next="b", terminal=True), stage("b", terminal=True)]
    issue = only(topology_error(pipeline(stages)), "stages.a.next")
    assert "a terminal stage completes the request" in issue.rule
    assert issue.value == ["b"]


def test_route_fn_is_carried():
    stages = [stage("a", next=["b", "c"], route_fn="m.x:route"), stage("b", terminal=True), stage("c", terminal=True)]
    assert compiled(pipeline(stages)).stage("a").route_fn == "m.x:route"


def test_every_graph_error_at_once():
    stages = [
        stage("a", next=["b", "ghost"]),
        stage("b", next="a"),
        stage("c", wait_for="a"),
        stage("d", terminal=True, next="a"),
    ]
    error = topology_error(pipeline(stages, entry_stage="a"))
    assert set(paths(error)) == {
        "stages.a.next",      # unknown 'ghost'
        "stages.c.merge_fn",  # wait_for without merge_fn
        "stages.c.next",      # dead end
        "stages.d.next",      # terminal with next
        "stages.b.next",      # cycle a -> b -> a
        "stages.d",           # unreachable (c is reached through its wait_for edge)
        "stages",             # no reachable terminal
    }
