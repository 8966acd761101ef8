#!/usr/bin/env python3
"""Fetch the JavaScript the memory viewer ships (``mkg_core/ui/static/vendor/``) from the npm registry.

A maintainer runs it when a pinned version changes; the files it writes are committed, so neither
installing MKG nor testing it needs the network or a JavaScript toolchain. Standard library only.

    python devtools/ui_assets.py            # download, check and write the pinned files
    python devtools/ui_assets.py --check    # only check the committed files against assets.json

For each package: the registry's metadata for the pinned version, the tarball it names, checked
against the registry's ``dist.integrity`` (SHA-512) before anything is read from it; then the
minified file and the licence are written, and ``assets.json`` records the version, the licence,
the tarball's address and integrity, and the SHA-256 of every file written (a test checks the
committed files against it). Only licences on :data:`ALLOWED_LICENCES` are accepted: Neo4j's own
graph library (``@neo4j-nvl/base``) is licensed for Neo4j's commercial products only, so the
viewer draws graphs with cytoscape instead.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tarfile
import urllib.parse
import urllib.request

REGISTRY = "https://registry.npmjs.org"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENDOR = os.path.join(ROOT, "mkg_core", "ui", "static", "vendor")
MANIFEST = os.path.join(VENDOR, "assets.json")
ALLOWED_LICENCES = frozenset({"MIT", "0BSD", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "ISC"})

#: package -> (version, {file in the tarball: name written under vendor/})
PINNED: dict[str, tuple[str, dict[str, str]]] = {
    "htmx.org": (
        "2.0.11",
        {"package/dist/htmx.min.js": "htmx.min.js", "package/LICENSE": "htmx.LICENSE.txt"},
    ),
    "cytoscape": (
        "3.35.0",
        {"package/dist/cytoscape.min.js": "cytoscape.min.js", "package/LICENSE": "cytoscape.LICENSE.txt"},
    ),
}


def _get(url: str) -> bytes:
    request = urllib.request.Request(
        url, headers={"Accept": "application/json", "User-Agent": "mkg-devtools"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return bytes(response.read())


def _check_integrity(data: bytes, integrity: str) -> None:
    algorithm, _, expected = integrity.partition("-")
    if algorithm != "sha512":
        raise SystemExit(f"unexpected integrity algorithm {algorithm!r}")
    actual = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if actual != expected:
        raise SystemExit(f"tarball integrity mismatch: {actual} != {expected}")


def fetch(name: str, version: str, files: dict[str, str]) -> dict[str, object]:
    meta = json.loads(_get(f"{REGISTRY}/{urllib.parse.quote(name, safe='@')}/{version}"))
    licence = str(meta.get("license") or "")
    if licence not in ALLOWED_LICENCES:
        raise SystemExit(f"{name}@{version} is licensed {licence!r}, which is not on the allowed list")
    tarball, integrity = meta["dist"]["tarball"], meta["dist"]["integrity"]
    data = _get(tarball)
    _check_integrity(data, integrity)
    written: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member, target in files.items():
            handle = archive.extractfile(member)
            if handle is None:
                raise SystemExit(f"{member} is not a file in {tarball}")
            content = handle.read()
            with open(os.path.join(VENDOR, target), "wb") as out:
                out.write(content)
            written[target] = hashlib.sha256(content).hexdigest()
            print(f"{name}@{version}: {target} ({len(content):,} bytes)")
    return {
        "version": version,
        "license": licence,
        "tarball": tarball,
        "integrity": integrity,
        "files": written,
    }


def check() -> int:
    """Compare the committed files with the digests in assets.json; 1 when one differs."""
    with open(MANIFEST, encoding="utf-8") as handle:
        manifest = json.load(handle)
    bad = 0
    for name, entry in manifest["packages"].items():
        for target, digest in entry["files"].items():
            with open(os.path.join(VENDOR, target), "rb") as handle:
                actual = hashlib.sha256(handle.read()).hexdigest()
            if actual != digest:
                print(f"{name}: {target} differs from assets.json", file=sys.stderr)
                bad = 1
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the committed files")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    os.makedirs(VENDOR, exist_ok=True)
    packages = {name: fetch(name, version, files) for name, (version, files) in PINNED.items()}
    manifest = {
        "note": "written by devtools/ui_assets.py; the viewer serves these files, fetching nothing",
        "packages": packages,
    }
    with open(MANIFEST, "w", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
