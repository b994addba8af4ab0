"""Head artifacts: one JSON file, checksummed and versioned; loading never unpickles.

The artifact freezes one condition's deployed head (and every head fitted for it,
for audits), the feature spec, and what data fitted it. It holds no timestamps, so
two fits on the same input give byte-identical files.
"""
from __future__ import annotations

import hashlib
import json

from baer_fast.errors import ArtifactError
from baer_fast.io.jsonl import atomic_open

FORMAT = "baer-fast-head"
SCHEMA_VERSION = 3     # 2: `tiebreak`, 3: `allocation` (an older reader would ignore either and score differently)
# pickle protocol >= 2; zip (torch.save, .npz); protocol 0/1 pickles of a dict or list
_PICKLE_MAGIC = (b"\x80", b"PK\x03\x04", b"(dp", b"(lp", b"}q", b"]q", b"}(", b"](")


def _canonical(d: dict) -> bytes:
    return json.dumps(d, sort_keys=True, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def checksum(d: dict) -> str:
    body = {k: v for k, v in d.items() if k != "checksum"}
    return "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()


def save(path: str, artifact: dict) -> None:
    """Write atomically (temp file, fsync, rename) with the checksum filled in."""
    d = dict(artifact)
    # the oldest schema that scores it right: a v2 reader can still use an artifact with no allocation
    d["format"], d["schema_version"] = FORMAT, SCHEMA_VERSION if d.get("allocation") is not None else 2
    d["checksum"] = checksum(d)
    text = json.dumps(d, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    with atomic_open(path) as fh:
        fh.write(text)


def load(path: str) -> dict:
    """Read and validate; raise ArtifactError naming the path (and line/field) on anything odd."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise ArtifactError(f"{path}: head artifact not found") from None
    except IsADirectoryError:
        raise ArtifactError(f"{path}: is a directory, expected a head artifact (.json)") from None
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read: {e.strerror or e}") from None
    if raw.startswith(_PICKLE_MAGIC):
        raise ArtifactError(f"{path}: looks like a pickle/zip file; baer-fast artifacts are JSON "
                            "and are never unpickled")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ArtifactError(f"{path}: not valid UTF-8 (byte {e.start}); not a baer-fast artifact") from None
    try:
        d = json.loads(text, parse_constant=_no_constants)
    except json.JSONDecodeError as e:
        raise ArtifactError(f"{path}:{e.lineno}: not a valid JSON artifact (truncated or corrupt?): "
                            f"{e.msg}") from None
    except (ValueError, RecursionError) as e:
        raise ArtifactError(f"{path}: not a valid JSON artifact: {e}") from None
    _validate(d, path)
    return d


def _count(v, least: int = 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= least


def _no_constants(name):
    raise ValueError(f"non-finite number {name}")


_TYPES = {"condition": str, "head": str, "heads": dict, "experts": list}


def _validate(d, path: str) -> None:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ArtifactError(f"{path}: field 'format': not a baer-fast head artifact (must be {FORMAT!r})")
    version = d.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ArtifactError(f"{path}: field 'schema_version': missing or not an integer")
    if version > SCHEMA_VERSION:
        raise ArtifactError(f"{path}: field 'schema_version': {version} is newer than this baer-fast "
                            f"understands ({SCHEMA_VERSION}); upgrade baer-fast")
    if version < 1:
        raise ArtifactError(f"{path}: field 'schema_version': unknown version {version}")
    if d.get("checksum") != checksum(d):
        raise ArtifactError(f"{path}: field 'checksum': mismatch: the artifact was modified after it "
                            "was written; refit it")
    check_fields(d, path)


def check_fields(d: dict, path: str, required: dict = _TYPES) -> None:
    """The fields scoring reads: `required` ({field: type}), expert names, the deployed head's
    parameters, and the optional `generation` and `allocation` (a file's, or a dict handed to Judge)."""
    for key, typ in required.items():
        if key not in d:
            raise ArtifactError(f"{path}: field '{key}': missing")
        if not isinstance(d[key], typ):
            raise ArtifactError(f"{path}: field '{key}': expected {typ.__name__}, got {type(d[key]).__name__}")
    if not all(isinstance(e, str) and e for e in d["experts"]):
        raise ArtifactError(f"{path}: field 'experts': expected a list of expert names")
    if d["head"] not in d["heads"]:
        raise ArtifactError(f"{path}: field 'head': deployed head {d['head']!r} has no parameters in 'heads'")
    gen = d.get("generation")
    if gen is not None and not (isinstance(gen, dict) and all(
            isinstance(g, dict) and _count(g.get("max_new_tokens")) and _count(g.get("seed"), 0)
            for g in gen.values())):
        raise ArtifactError(f"{path}: field 'generation': expected {{expert: {{max_new_tokens, seed}}}}")
    alloc = d.get("allocation")
    if alloc is not None and not (isinstance(alloc, dict) and all(
            isinstance(es, list) and all(e in d["experts"] for e in es) for es in alloc.values())):
        raise ArtifactError(f"{path}: field 'allocation': expected {{subset: [experts of 'experts']}}")


def default_artifact() -> dict:
    """The label-free default head (heads/default.py) as a loaded artifact, built in code."""
    from baer_fast.heads.default import DefaultHead

    head = DefaultHead()
    d = {"format": FORMAT, "schema_version": SCHEMA_VERSION, "condition": "default", "head": head.kind,
         "heads": {head.kind: head.to_json()}, "experts": list(head.experts), "derived_params": {},
         "fitted_on": None}
    d["checksum"] = checksum(d)
    return d


def deployed_head(d: dict):
    """Instantiate the deployed head object of a loaded artifact."""
    from baer_fast.heads import head_class

    params = d["heads"][d["head"]]
    try:
        head = head_class(d["head"]).from_json(params)
        if d.get("cascade"):      # early exit (selection/cascade.py): the cheap stage first
            from baer_fast.heads.cascade import CascadeHead
            head = CascadeHead(head_class("stack").from_json(d["cascade"]["stage1"]), head, float(d["cascade"]["tau"]))
        if d.get("allocation") is not None:     # pruned per subset: a pair's evidence is its subset's experts
            from baer_fast.heads.allocation import AllocatedHead
            head = AllocatedHead(head, {str(g): list(es) for g, es in d["allocation"].items()}, list(d["experts"]))
        weight = float((d.get("tiebreak") or {}).get("weight", 0.0))
        if weight:               # exact ties go to a candidate, not a position (heads/tiebreak.py)
            from baer_fast.heads.tiebreak import TieBreakHead
            head = TieBreakHead(head, weight)
        return head
    except (KeyError, TypeError, ValueError) as e:
        raise ArtifactError(f"head {d['head']!r}: malformed parameters ({e})") from None
