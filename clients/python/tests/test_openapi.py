"""The client held to docs/openapi.yaml (as docs/openapi.json, which a Go test keeps equal to
it): every endpoint the client calls is in the spec, every operation of the spec is called or
left out on purpose, and the models have the members of the spec's schemas, so that the
client cannot drift from the API."""

from __future__ import annotations

import dataclasses
import json
import os
import unittest

import harness  # noqa: F401  (puts this tree's iacp on sys.path)

import iacp
from iacp.client import ENDPOINTS, MESSAGE_PATH

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = json.load(open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8"))

#: The operations the Python client leaves out, and why.
NOT_COVERED = {
    ("GET", "/.well-known/iacp/v1/connect"): "the WebSocket binding: the client long-polls the inbox instead",
    ("POST", "/v1/discover"): "GET /v1/discover carries the same query",
    ("GET", "/metrics"): "Prometheus scrapes it",
    ("POST", "/auth/token"): "an operator's call (iacp-node token)",
    ("GET", "/v1/trust"): "an operator's call (iacp-node trust)",
    ("POST", "/v1/trust/forget"): "an operator's call (iacp-node trust forget)",
    ("POST", "/v1/trust/invites"): "an operator's call (iacp-node invite)",
    ("POST", "/v1/trust/revoke"): "an operator's call (iacp-node revoke)",
    ("GET", "/v1/trust/certificates"): "an operator's call (iacp-node certs)",
    ("GET", "/v1/approvals"): "an operator's call (iacp-node approvals)",
    ("POST", "/v1/approvals/{message_id}/approve"): "an operator's call (iacp-node approve)",
    ("POST", "/v1/approvals/{message_id}/reject"): "an operator's call (iacp-node reject)",
    ("POST", "/v1/coord/any"): "coordination: the CLI's request --capability, or the TypeScript client",
    ("POST", "/v1/coord/fallback"): "coordination: the CLI's request --fallback, or the TypeScript client",
    ("POST", "/v1/coord/scatter"): "coordination: the CLI's scatter, or the TypeScript client",
    ("POST", "/v1/coord/pipeline"): "coordination: the CLI's pipeline, or the TypeScript client",
    ("POST", "/v1/workflows"): "workflows: the CLI's workflow run",
    ("GET", "/v1/workflows"): "workflows: the CLI's workflow list",
    ("GET", "/v1/workflows/{id}"): "workflows: the CLI's workflow status",
    ("POST", "/v1/workflows/{id}/cancel"): "workflows: the CLI's workflow cancel",
}

#: Each model and the spec's schema of the same document.
MODELS = {
    iacp.SendResult: "SendResult",
    iacp.CancelResult: "CancelResult",
    iacp.InboxItem: "InboxItem",
    iacp.InboxPage: "InboxPage",
    iacp.AgentRecord: "Record",
    iacp.AskResult: "AskResult",
    iacp.Outbox: "Outbox",
    iacp.OutboxEntry: "OutboxEntry",
    iacp.ErrorPayload: "ErrorDoc.error",
    iacp.EventPayload: "Event",
}


def operations():
    for path, ops in SPEC["paths"].items():
        for method in ops:
            if method != "parameters":
                yield method.upper(), path


def schema(name):
    parts = name.split(".")
    s = SPEC["components"]["schemas"][parts[0]]
    for p in parts[1:]:
        s = s["properties"][p]
    return s


def members(model):
    return {f.metadata.get("json", f.name) for f in dataclasses.fields(model) if f.name != "extra"} - {None}


class OpenAPITest(unittest.TestCase):
    def test_every_endpoint_the_client_calls_is_in_the_spec(self) -> None:
        ops = set(operations())
        for method, path in sorted(ENDPOINTS):
            self.assertIn((method, path), ops, "the client calls %s %s, which docs/openapi.yaml does not describe" % (method, path))

    def test_every_operation_is_called_or_left_out_on_purpose(self) -> None:
        for op in sorted(operations()):
            self.assertTrue(op in ENDPOINTS or op in NOT_COVERED,
                            "docs/openapi.yaml describes %s %s: call it in iacp.Client (and ENDPOINTS), or say in NOT_COVERED why not" % op)
        for op in NOT_COVERED:
            self.assertNotIn(op, ENDPOINTS, "%s %s is called and listed as left out" % op)

    def test_models_have_the_members_of_the_schemas(self) -> None:
        for model, name in MODELS.items():
            want = set(schema(name)["properties"])
            self.assertEqual(members(model), want, "%s and the spec's %s differ" % (model.__name__, name))

    def test_send_statuses_are_the_specs(self) -> None:
        self.assertEqual(set(iacp.SEND_STATUSES), set(schema("SendResult")["properties"]["status"]["enum"]))

    def test_queue_unknown_is_a_parameter_of_the_message_binding(self) -> None:
        params = [p["$ref"].rsplit("/", 1)[1] for p in SPEC["paths"][MESSAGE_PATH]["post"]["parameters"] if "$ref" in p]
        self.assertIn("queue_unknown", params)
        self.assertEqual(SPEC["components"]["parameters"]["queue_unknown"]["name"], "queue_unknown")


if __name__ == "__main__":
    unittest.main()
