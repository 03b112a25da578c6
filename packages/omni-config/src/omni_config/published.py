"""The published JSON Schema (``omni-compile schema``): both tiers in one document.

Editors (and CI steps that run a JSON-Schema validator) read this file to check
pipeline YAML as it is typed. A deployment file (``extends:``) is partial on
purpose, so it gets its own branch of the schema: the deployment-tier fields
only, with the same definitions as the full pipeline file it extends. Without
that branch an editor would flag every valid deployment file.
"""

from __future__ import annotations

from typing import Any

from . import tiers

#: Stable identifier of the schema (a URN: it names the document, it is not fetched).
SCHEMA_ID = "urn:omni:pipeline-config:v1"
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def json_schema() -> dict[str, Any]:
    """Draft 2020-12 schema: a deployment file when ``extends`` is present, else a full pipeline file."""
    from .schema import PipelineConfig

    full = PipelineConfig.model_json_schema()
    defs = full.pop("$defs", {})
    defs["PipelineConfig"] = full
    defs["DeploymentConfig"] = _deployment(full, defs)
    return {
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": "omni pipeline config",
        "description": "A full pipeline file (the model tier: stages, wiring, factories, the process-local contract, "
        "and their default placement), or a deployment file that names one in 'extends' and sets deployment-tier "
        "fields only (process, gpu, tp_size, memory fractions, declared factory_args, processes, placement).",
        "$defs": defs,
        "if": {"type": "object", "required": ["extends"]},
        "then": {"$ref": "#/$defs/DeploymentConfig"},
        "else": {"$ref": "#/$defs/PipelineConfig"},
    }


def _deployment(full: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    stage_fields = defs["StageConfig"]["properties"]
    roots = dict.fromkeys(path.split(".")[0] for path in tiers.STAGE_DEPLOYMENT_FIELDS)
    stage = {
        "type": "object",
        "title": "DeploymentStage",
        "description": "Deployment settings of one stage of the extended model, found by name.",
        "additionalProperties": False,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "description": "Name of a stage of the extended model."},
            **{root: stage_fields[root] for root in roots},
            "factory_args": {
                "type": "object",
                "description": "New values for factory arguments the model's stage already declares.",
            },
        },
    }
    return {
        "type": "object",
        "title": "DeploymentConfig",
        "additionalProperties": False,
        "required": ["extends"],
        "properties": {
            "extends": {
                "type": "string",
                "minLength": 1,
                "description": "The model's pipeline file (relative to this file) or a registered model name.",
            },
            "stages": {"type": "array", "items": stage, "description": "Stages to re-place; stages not listed keep the model's settings."},
            **{key: full["properties"][key] for key in ("processes", "placement")},
        },
    }
