"""JSON Schemas (2020-12) generated from the models; committed in `schemas/` and drift-tested."""

from __future__ import annotations

import json
from typing import Annotated, Any, Union

from pydantic import Field, TypeAdapter

from cltoolkit.errors import UnknownNameError

__all__ = ["SCHEMA_NAMES", "generate", "generate_all"]

SCHEMA_NAMES = ("protocol", "lock", "run-record", "results")
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _protocol_schema() -> dict[str, Any]:
    from cltoolkit.registry import registries

    suites = registries(plugins=False).suite
    models = tuple(suites.get(name).protocol_model for name in suites.names() if suites.origin(name) == "builtin")
    union = Annotated[Union[models], Field(discriminator="suite")]  # type: ignore[valid-type]  # noqa: UP007 - a runtime tuple
    schema = TypeAdapter(union).json_schema(mode="validation")
    schema["title"] = "clt protocol"
    schema["description"] = (
        "A clt protocol document, discriminated by `suite`. Hash: jcs-sha256/v1 over the document without "
        "`results` and `status`."
    )
    return schema


def generate(name: str) -> dict[str, Any]:
    """The schema called `name`, with `$schema` and `$id`."""
    if name == "protocol":
        body = _protocol_schema()
    elif name == "lock":
        from cltoolkit.protocol.lock import Lock

        body = Lock.model_json_schema()
    elif name == "run-record":
        from cltoolkit.run.record import RunRecord

        body = RunRecord.model_json_schema()
    elif name == "results":
        from cltoolkit.protocol.results import Results

        body = Results.model_json_schema()
    else:
        raise UnknownNameError(f"unknown schema {name!r}. Available: {', '.join(SCHEMA_NAMES)}")
    return {"$schema": _DIALECT, "$id": f"urn:cltoolkit:schema:{name}:1", **body}


def generate_all() -> dict[str, str]:
    """File name -> text for every schema."""
    return {
        f"{name}.schema.json": json.dumps(generate(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        for name in SCHEMA_NAMES
    }
