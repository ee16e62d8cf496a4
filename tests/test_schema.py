"""Schema derivation and bindings over every operation of the embedded document."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from interpreter.build.schema import BODY_FIELD, MULTIPART, OCTET, PATH


def test_every_operation_is_an_action(catalog):
    ops = {o["operationId"] for item in catalog.document["paths"].values() for m, o in item.items() if isinstance(o, dict) and "operationId" in o}
    named = {a.operation_id for a in catalog.all_actions.values() if a.operation_id}
    assert ops == named
    assert len(ops) == 410


def test_every_input_schema_is_valid_draft_2020_12(catalog):
    for action in catalog.all_actions.values():
        schema = action.input_schema
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", action.id
        assert schema["additionalProperties"] is False, action.id
        assert isinstance(schema["properties"], dict), action.id
        for ref_holder in [schema]:
            text = str(ref_holder)
            assert "#/components/" not in text, f"{action.id} keeps a components $ref"


def test_bindings_and_properties_match(catalog):
    for action in catalog.all_actions.values():
        props = set(action.input_schema["properties"])
        bound = {b.arg for b in action.bindings}
        if action.handler == "chunked_upload":  # the content and local-file arguments go to the handler, not the wire
            bound |= {action.options["content_argument"], action.options["file_argument"]}
        if action.handler == "live_channel":  # the capture's bounds (conventions.yaml `live`) go to the handler
            bound |= catalog.conventions.live.bound_arguments()
        assert props == bound, action.id
        assert set(action.required) <= props, action.id


def test_environment_parameter_is_optional_with_default(catalog):
    scoped = [a for a in catalog.all_actions.values() if a.env_scoped]
    assert len(scoped) >= 240  # 240 operations + the environment-scoped extra routes
    for a in scoped:
        env = a.input_schema["properties"]["environmentId"]
        assert env["default"] == "0"
        assert "environmentId" not in a.required, a.id
        assert any(b.arg == "environmentId" and b.location == PATH and b.wire == "id" for b in a.bindings)


def test_non_environment_id_stays_id(catalog):
    a = catalog.all_actions["api_key.get"]
    assert "id" in a.required and "environmentId" not in a.input_schema["properties"]


def test_environment_default_follows_configuration():
    from interpreter.build.catalog import BuildOptions, build

    cat = build(BuildOptions(environment_default="7"))
    assert cat.actions["container.list"].input_schema["properties"]["environmentId"]["default"] == "7"


def test_json_body_fields_are_flat_and_read_only_fields_dropped(catalog):
    a = catalog.all_actions["image.pull"]
    props = a.input_schema["properties"]
    assert "$schema" not in props
    body_args = [b for b in a.bindings if b.location == BODY_FIELD]
    assert body_args and all(b.arg in props for b in body_args)


def test_name_clash_is_renamed_deterministically_and_recorded(catalog):
    a = catalog.all_actions["image.prune"]
    clash = [b for b in a.bindings if b.renamed_from]
    assert [(b.arg, b.location, b.wire) for b in clash] == [("body_dangling", BODY_FIELD, "dangling")]


def test_multipart_and_octet_stream_bindings(catalog):
    create = catalog.all_actions["project.create"]
    parts = {b.arg: b for b in create.bindings if b.location == MULTIPART}
    assert set(parts) == {"files"}  # project and manifest are JSON parts shaped by the overlay (test_input_shaping)
    assert parts["files"].is_blob and parts["files"].is_array
    assert create.input_schema["properties"]["files"]["items"] == {"$ref": "#/$defs/Blob"}
    chunk = catalog.all_actions["upload.put_chunk"]
    assert [b.location for b in chunk.bindings if b.arg == "body"] == [OCTET]
    v = Draft202012Validator(chunk.input_schema)
    assert not list(v.iter_errors({"kind": "image", "uploadId": "u", "index": 0, "body": {"base64": "AAEC"}}))
    assert list(v.iter_errors({"kind": "image", "uploadId": "u", "index": 0, "body": {"base64": "AA", "text": "x"}}))


def test_withheld_headers_are_not_arguments(catalog):
    login = catalog.all_actions["auth.login"]
    assert "userAgent" not in login.input_schema["properties"]
    assert not any(b.wire.lower() in ("host", "user-agent", "origin") for a in catalog.all_actions.values() for b in a.bindings)


def test_classification_defaults_and_corrections(catalog):
    acts = catalog.all_actions
    assert acts["container.list"].read_only and not acts["container.list"].destructive
    assert acts["container.delete"].destructive  # DELETE
    assert acts["container.kill"].destructive and acts["image.prune"].destructive  # verbs
    assert acts["project.down"].destructive and acts["volume_backup.restore"].destructive
    assert not acts["container.restart"].destructive and not acts["container.restart"].read_only
    assert acts["settings.search"].read_only  # a POST that only reads (corrected)
    assert acts["system.stop_all"].destructive  # a verb that hides it (corrected)
    assert not acts["vulnerability.unignore"].destructive  # a DELETE that is harmless (corrected)
    assert acts["container.stop"].idempotent and not acts["container.restart"].idempotent


def test_response_kind_corrections(catalog):
    kinds = {a.id: a.response_kind for a in catalog.all_actions.values()}
    assert kinds["image.pull"] == kinds["project.up"] == "ndjson"
    assert kinds["container.download_logs"] == "text_download"
    assert kinds["image.export"] == kinds["app_image.get_logo"] == "binary_download"
    assert kinds["container.list"] == "json"
    assert kinds["health.head"] == "empty"
    assert kinds["stream.watch"] == "live_channel" and not catalog.all_actions["stream.watch"].pending  # live.py serves it


def test_security_classes(catalog):
    acts = catalog.all_actions
    assert acts["auth.login"].security == "public"
    assert acts["api_key.create_mine"].security == "bearer"
    assert acts["container.list"].security == "either"


def test_tool_names_are_unique_and_valid(catalog):
    import re

    names = [a.tool_name() for a in catalog.all_actions.values()]
    assert len(names) == len(set(names))
    assert all(re.match(r"^[A-Za-z0-9_-]{1,64}$", n) for n in names)
