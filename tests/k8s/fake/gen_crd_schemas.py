#!/usr/bin/env python3
"""gen_crd_schemas.py [SPECS_DIR] - regenerate crd_schemas.json, the
openAPIV3Schema of the storage version (v1beta1) of each agent-sandbox CRD
(descriptions left out), from the published CRDs in
SPECS_DIR/agent-sandbox/crds (default $SBX_SPECS_DIR or ../shared/specs
beside the repository). Needs python3-yaml."""
import json
import os
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {"sandboxes": "agents.x-k8s.io_sandboxes.yaml",
         "sandboxclaims": "extensions.agents.x-k8s.io_sandboxclaims.yaml",
         "sandboxtemplates": "extensions.agents.x-k8s.io_sandboxtemplates.yaml",
         "sandboxwarmpools": "extensions.agents.x-k8s.io_sandboxwarmpools.yaml"}


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k != "description"}
    if isinstance(x, list):
        return [strip(i) for i in x]
    return x


def main():
    specs = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(
        "SBX_SPECS_DIR", os.path.join(HERE, "..", "..", "..", "..", "shared", "specs"))
    out = {}
    for plural, f in FILES.items():
        with open(os.path.join(specs, "agent-sandbox", "crds", f)) as fh:
            crd = yaml.safe_load(fh)
        v = next(v for v in crd["spec"]["versions"] if v.get("storage"))
        out[plural] = {"version": v["name"], "schema": strip(v["schema"]["openAPIV3Schema"])}
    with open(os.path.join(HERE, "crd_schemas.json"), "w") as fh:
        json.dump(out, fh, separators=(",", ":"), sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
