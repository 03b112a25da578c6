"""Check ``factory_args`` values against the knobs a stage declares, before anything starts.

A model declares, next to a stage's ``factory_args`` (which hold the defaults), the type and
range of each knob an operator may set (``knobs``, model tier). Every value, the default and
what a deployment file or ``--stages.S.factory_args.K`` sets, is checked here, so ``sample_rate
0`` is a config error with its path, value, rule and fix instead of a factory traceback or a
server that answers 500s. Stages without ``knobs`` keep their factory_args unchecked (their
factory is the only judge), as before knobs existed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import rules
from .errors import ConfigIssue

if TYPE_CHECKING:
    from .schema import KnobConfig, PipelineConfig


def rule_of(knob: KnobConfig) -> str:
    return rules.describe_knob(knob.type, knob.min, knob.max, knob.choices, knob.nullable)


def knob_issues(config: PipelineConfig) -> list[ConfigIssue]:
    """Every knob without a default and every factory_args value outside its knob's rule."""
    issues: list[ConfigIssue] = []
    for stage in config.stages:
        for name, knob in stage.knobs.items():
            if name not in stage.factory_args:
                issues.append(
                    ConfigIssue(
                        f"stages.{stage.name}.knobs.{name}",
                        f"knob '{name}' has no default: every knob's default is written in the stage's factory_args",
                        f"add factory_args.{name}: <default> ({rule_of(knob)}) to stage '{stage.name}'",
                    )
                )
                continue
            value = stage.factory_args[name]
            if rules.knob_value_breaks(value, knob.type, knob.min, knob.max, knob.choices, knob.nullable):
                what = f" (the knob: {knob.help})" if knob.help else ""
                issues.append(
                    ConfigIssue(
                        f"stages.{stage.name}.factory_args.{name}",
                        f"{name} must be {rule_of(knob)}{what}",
                        f"set stages.{stage.name}.factory_args.{name} to {rule_of(knob)}",
                        value=value,
                    )
                )
    return issues
