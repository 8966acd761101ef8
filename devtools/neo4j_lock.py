#!/usr/bin/env python3
"""Write the lock file of the Neo4j MKG runs (``mkg_core/localdb/neo4j.lock.json``): every jar of
Neo4j Community's runtime classpath, with its path on Maven Central, size and SHA-256.

A maintainer runs it when the pinned Neo4j changes; ``mkg neo4j install`` then downloads exactly
those files and refuses any whose digest differs. Standard library only.

    python devtools/neo4j_lock.py 2026.09.0            # resolve, download, check, write the lock
    python devtools/neo4j_lock.py 2026.09.0 --compare mvn-dependency-list.txt

The runtime closure of ``org.neo4j:neo4j`` is resolved from the POMs as Maven 3 does for a project
that depends on it (maven-resolver 1.x, classic dependency manager):

* the effective model of each POM: the parent chain (properties, dependencies and dependency
  management inherited), active profiles (activeByDefault, property, jdk, os; file activation
  counts as inactive), ``${...}`` interpolation, imported BOMs (explicit entries win, then the first
  import), management applied to the model's own dependencies (version, scope, optional,
  exclusions when none are declared), relocations;
* the graph: compile and runtime scopes (test, provided and system dropped), optional dependencies
  of dependencies dropped, exclusions accumulated along the path (wildcards allowed), nearest
  wins (ties: the first declaration, breadth first) and only the winner's dependencies are
  followed, version ranges through maven-metadata.xml.

Each jar's published ``.sha1`` is checked before its SHA-256 is written. POMs and jars are cached
under ``.cache/maven`` of the checkout. ``--compare`` checks the result against the output of
``mvn dependency:list -DincludeScope=runtime`` for the same root.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

REPO = "https://repo1.maven.org/maven2"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "maven")
LOCK = os.path.join(ROOT, "mkg_core", "localdb", "neo4j.lock.json")
MAIN_CLASS = "org.neo4j.server.Neo4jCommunity"
TYPE_MAP = {  # type -> (extension, classifier implied by the type)
    "jar": ("jar", ""),
    "bundle": ("jar", ""),
    "maven-plugin": ("jar", ""),
    "ejb": ("jar", ""),
    "test-jar": ("jar", "tests"),
    "ejb-client": ("jar", "client"),
    "java-source": ("jar", "sources"),
    "javadoc": ("jar", "javadoc"),
    "pom": ("pom", ""),
}
SCOPE_WIDTH = {"compile": 2, "runtime": 1}


# ---------------------------------------------------------------- fetching
def fetch(path: str) -> bytes | None:
    """Bytes of REPO/path, cached on disk; None for a 404."""
    local = os.path.join(CACHE, path)
    missing = local + ".404"
    if os.path.exists(local):
        with open(local, "rb") as f:
            return f.read()
    if os.path.exists(missing):
        return None
    for attempt in range(4):
        try:
            with urllib.request.urlopen(f"{REPO}/{path}", timeout=60) as r:
                data = r.read()
            break
        except urllib.error.HTTPError as e:
            if e.code == 404:
                os.makedirs(os.path.dirname(local), exist_ok=True)
                open(missing, "w").close()
                return None
            if attempt == 3:
                raise
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            if attempt == 3:
                raise
        time.sleep(1 + attempt * 2)
    os.makedirs(os.path.dirname(local), exist_ok=True)
    tmp = local + ".part"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, local)
    return data


def gpath(g: str, a: str, v: str, ext: str, classifier: str = "") -> str:
    c = f"-{classifier}" if classifier else ""
    return f"{g.replace('.', '/')}/{a}/{v}/{a}-{v}{c}.{ext}"


# ---------------------------------------------------------------- POM parsing
def _strip_ns(el):
    for e in el.iter():
        if isinstance(e.tag, str) and "}" in e.tag:
            e.tag = e.tag.split("}", 1)[1]
    return el


def _t(el, name, default=""):
    if el is None:
        return default
    c = el.find(name)
    return c.text.strip() if c is not None and c.text is not None else default


def _deps(parent_el, tag):
    out = []
    if parent_el is None:
        return out
    holder = parent_el.find(tag)
    if holder is None:
        return out
    for d in holder.findall("dependency"):
        out.append(
            {
                "groupId": _t(d, "groupId"),
                "artifactId": _t(d, "artifactId"),
                "version": _t(d, "version") or None,
                "type": _t(d, "type") or None,
                "classifier": _t(d, "classifier") or None,
                "scope": _t(d, "scope") or None,
                "optional": _t(d, "optional") or None,
                "exclusions": [
                    (_t(x, "groupId"), _t(x, "artifactId")) for x in d.findall("exclusions/exclusion")
                ]
                if d.find("exclusions") is not None
                else None,
            }
        )
    return out


def _props(el):
    p = {}
    if el is not None and el.find("properties") is not None:
        for c in el.find("properties"):
            if isinstance(c.tag, str):
                p[c.tag] = (c.text or "").strip()
    return p


_raw_cache: dict = {}


def raw_pom(g, a, v):
    key = (g, a, v)
    if key in _raw_cache:
        return _raw_cache[key]
    data = fetch(gpath(g, a, v, "pom"))
    if data is None:
        raise FileNotFoundError(f"POM not found: {g}:{a}:{v}")
    root = _strip_ns(ET.fromstring(data))
    par = root.find("parent")
    m = {
        "groupId": _t(root, "groupId") or _t(par, "groupId"),
        "artifactId": _t(root, "artifactId"),
        "version": _t(root, "version") or _t(par, "version"),
        "packaging": _t(root, "packaging", "jar"),
        "parent": (_t(par, "groupId"), _t(par, "artifactId"), _t(par, "version"))
        if par is not None
        else None,
        "properties": _props(root),
        "deps": _deps(root, "dependencies"),
        "mgmt": _deps(root.find("dependencyManagement"), "dependencies"),
        "profiles": [],
        "relocation": None,
    }
    rel = root.find("distributionManagement/relocation")
    if rel is not None:
        m["relocation"] = (
            _t(rel, "groupId") or None,
            _t(rel, "artifactId") or None,
            _t(rel, "version") or None,
        )
    for p in root.findall("profiles/profile"):
        m["profiles"].append(
            {
                "id": _t(p, "id"),
                "activation": p.find("activation"),
                "properties": _props(p),
                "deps": _deps(p, "dependencies"),
                "mgmt": _deps(p.find("dependencyManagement"), "dependencies"),
            }
        )
    _raw_cache[key] = m
    return m


# ---------------------------------------------------------------- profiles
JDK = "25"
SYSPROPS: dict = {}  # -Dkey=value as Maven would see them (none by default)


def _version_tuple(s):
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.\-_]", s) if x)


def _jdk_matches(spec: str) -> bool:
    spec = spec.strip()
    neg = spec.startswith("!")
    if neg:
        spec = spec[1:]
    if spec[:1] in "[(":
        lo_inc, hi_inc = spec[0] == "[", spec[-1] == "]"
        lo, _, hi = spec[1:-1].partition(",")
        jv = _version_tuple(JDK)
        ok = True
        if lo.strip():
            ok &= jv >= _version_tuple(lo) if lo_inc else jv > _version_tuple(lo)
        if hi.strip():
            ok &= jv <= _version_tuple(hi) if hi_inc else jv < _version_tuple(hi)
    else:
        ok = (JDK + ".").startswith(spec + ".") or spec == JDK
    return ok != neg


def _profile_active(act) -> bool | None:
    """True/False when an activation rule decides, None when only activeByDefault may apply."""
    if act is None:
        return False
    results = []
    prop = act.find("property")
    if prop is not None:
        name, value = _t(prop, "name"), _t(prop, "value") or None
        if name.startswith("!"):
            results.append(name[1:] not in SYSPROPS)
        elif value is None:
            results.append(name in SYSPROPS)
        elif value.startswith("!"):
            results.append(SYSPROPS.get(name) != value[1:])
        else:
            results.append(SYSPROPS.get(name) == value)
    if act.find("jdk") is not None:
        results.append(_jdk_matches(_t(act, "jdk")))
    os_el = act.find("os")
    if os_el is not None:
        fam = _t(os_el, "family").lower()
        name = _t(os_el, "name").lower()
        arch = _t(os_el, "arch").lower()
        ok = True
        if fam:
            ok &= (
                (fam in ("unix", "linux")) if not fam.startswith("!") else (fam[1:] not in ("unix", "linux"))
            )
        if name:
            ok &= (name == "linux") if not name.startswith("!") else (name[1:] != "linux")
        if arch:
            ok &= (
                (arch in ("amd64", "x86_64"))
                if not arch.startswith("!")
                else (arch[1:] not in ("amd64", "x86_64"))
            )
        results.append(ok)
    if act.find("file") is not None:
        results.append(False)  # no basedir for a dependency POM
    if results:
        return all(results)
    return None


def active_profiles(raw):
    active, defaults = [], []
    for p in raw["profiles"]:
        r = _profile_active(p["activation"])
        if r:
            active.append(p)
        elif r is None and p["activation"] is not None and _t(p["activation"], "activeByDefault") == "true":
            defaults.append(p)
    return active or defaults


# ---------------------------------------------------------------- effective model
def mkey(d):
    t = d.get("type") or "jar"
    return (d["groupId"], d["artifactId"], t, d.get("classifier") or "")


_PROP = re.compile(r"\$\{([^}]+)\}")


def interpolate(s, ctx, depth=0):
    if s is None or "${" not in s or depth > 20:
        return s

    def rep(m):
        k = m.group(1)
        if k in ctx:
            return interpolate(ctx[k], ctx, depth + 1)
        if k.startswith("env."):
            return os.environ.get(k[4:], m.group(0))
        return m.group(0)

    return _PROP.sub(rep, s)


def _interp_dep(d, ctx):
    e = dict(d)
    for f in ("groupId", "artifactId", "version", "type", "classifier", "scope", "optional"):
        e[f] = interpolate(e[f], ctx)
    if e["exclusions"] is not None:
        e["exclusions"] = [(interpolate(g, ctx), interpolate(a, ctx)) for g, a in e["exclusions"]]
    return e


_eff_cache: dict = {}


def effective(g, a, v, _stack=()):
    key = (g, a, v)
    if key in _eff_cache:
        return _eff_cache[key]
    if key in _stack:
        raise RuntimeError(f"cycle in parents/imports: {(*_stack, key)}")
    lineage = []
    cur = key
    while cur:
        raw = raw_pom(*cur)
        lineage.append(raw)
        cur = raw["parent"]
    # merge from the top-most parent down to the child
    props, deps, mgmt = {}, collections.OrderedDict(), collections.OrderedDict()
    for raw in reversed(lineage):
        p = dict(raw["properties"])
        d, mg = list(raw["deps"]), list(raw["mgmt"])
        for prof in active_profiles(raw):
            p.update(prof["properties"])
            d += prof["deps"]
            mg += prof["mgmt"]
        props.update(p)
        # child dependencies first, then inherited ones not redeclared (Maven's ModelMerger order)
        child = collections.OrderedDict((mkey(x), x) for x in d)
        for k, x in deps.items():
            child.setdefault(k, x)
        deps = child
        for x in mg:
            mgmt[mkey(x)] = x
    me = lineage[0]
    ctx = dict(props)
    for prefix in ("project.", "pom.", ""):
        ctx[prefix + "groupId"] = me["groupId"]
        ctx[prefix + "artifactId"] = me["artifactId"]
        ctx[prefix + "version"] = me["version"]
        ctx[prefix + "packaging"] = me["packaging"]
    if me["parent"]:
        for prefix in ("project.parent.", "parent."):
            ctx[prefix + "groupId"], ctx[prefix + "artifactId"], ctx[prefix + "version"] = me["parent"]
    ctx.setdefault("java.version", JDK)
    ctx.update(SYSPROPS)
    deps = [_interp_dep(x, ctx) for x in deps.values()]
    raw_mgmt = [_interp_dep(x, ctx) for x in mgmt.values()]
    managed = collections.OrderedDict()
    imports = []
    for x in raw_mgmt:
        if x["scope"] == "import" and (x["type"] or "jar") == "pom":
            imports.append(x)
        else:
            managed[mkey(x)] = x
    for imp in imports:
        bom = effective(imp["groupId"], imp["artifactId"], imp["version"], (*_stack, key))
        for k, x in bom["managed"].items():
            managed.setdefault(k, x)
    # inject management into the model's own dependencies
    out = []
    for d in deps:
        m = managed.get(mkey(d))
        d = dict(d)
        if m:
            if not d["version"]:
                d["version"] = m["version"]
            if not d["scope"]:
                d["scope"] = m["scope"]
            if d["optional"] is None:
                d["optional"] = m["optional"]
            if not d["exclusions"]:
                d["exclusions"] = m["exclusions"]
        d["scope"] = d["scope"] or "compile"
        d["type"] = d["type"] or "jar"
        d["classifier"] = d["classifier"] or ""
        d["optional"] = (d["optional"] or "false").lower() == "true"
        d["exclusions"] = d["exclusions"] or []
        out.append(d)
    model = {
        "groupId": me["groupId"],
        "artifactId": me["artifactId"],
        "version": me["version"],
        "packaging": me["packaging"],
        "deps": out,
        "managed": managed,
        "relocation": me["relocation"],
    }
    _eff_cache[key] = model
    return model


# ---------------------------------------------------------------- versions
def _maven_version_key(v):
    """Rough ComparableVersion: numbers numerically, qualifiers below release."""
    qual = {
        "alpha": -5,
        "a": -5,
        "beta": -4,
        "b": -4,
        "milestone": -3,
        "m": -3,
        "rc": -2,
        "cr": -2,
        "snapshot": -1,
        "": 0,
        "ga": 0,
        "final": 0,
        "release": 0,
        "sp": 1,
    }
    out = []
    for tok in re.findall(r"\d+|[A-Za-z]+", v):
        out.append((1, int(tok)) if tok.isdigit() else (0, qual.get(tok.lower(), 0.5), tok.lower()))
    return out


def resolve_range(g, a, spec):
    if not spec or spec[0] not in "[(":
        return spec
    data = fetch(f"{g.replace('.', '/')}/{a}/maven-metadata.xml")
    versions = [e.text for e in _strip_ns(ET.fromstring(data)).iter("version")] if data else []
    best = None
    for part in re.findall(r"[\[(][^\])]*[\])]", spec):
        lo_inc, hi_inc = part[0] == "[", part[-1] == "]"
        inner = part[1:-1]
        if "," not in inner:
            cands = [inner.strip()]
        else:
            lo, hi = (s.strip() for s in inner.split(",", 1))
            cands = []
            for v in versions:
                k = _maven_version_key(v)
                if "SNAPSHOT" in v:
                    continue
                if lo and (k < _maven_version_key(lo) or (not lo_inc and k == _maven_version_key(lo))):
                    continue
                if hi and (k > _maven_version_key(hi) or (not hi_inc and k == _maven_version_key(hi))):
                    continue
                cands.append(v)
        for c in cands:
            if best is None or _maven_version_key(c) > _maven_version_key(best):
                best = c
    if best is None:
        raise RuntimeError(f"no version of {g}:{a} in {spec}")
    return best


# ---------------------------------------------------------------- graph
def excluded(g, a, excl):
    return any((eg in ("*", g)) and (ea in ("*", a)) for eg, ea in excl)


def relocate(g, a, v, seen=0):
    m = effective(g, a, v)
    r = m["relocation"]
    if r and seen < 5:
        return relocate(r[0] or g, r[1] or a, r[2] or v, seen + 1)
    return g, a, v


def resolve(roots):
    """roots: list of (g, a, v, type, classifier). Returns ordered dict conflict-key -> node."""
    Node = dict
    winners: collections.OrderedDict[tuple, Node] = collections.OrderedDict()
    edges = []  # (parent conflict key or None, child conflict key, declared scope)
    queue = collections.deque()
    for g, a, v, t, c in roots:
        queue.append(
            {
                "g": g,
                "a": a,
                "v": v,
                "type": t,
                "cls": c,
                "excl": frozenset(),
                "depth": 1,
                "parent": None,
                "declared": "compile",
            }
        )
    while queue:
        n = queue.popleft()
        n["v"] = resolve_range(n["g"], n["a"], n["v"])
        n["g"], n["a"], n["v"] = relocate(n["g"], n["a"], n["v"])
        ext, tcls = TYPE_MAP.get(n["type"], (n["type"], ""))
        cls = n["cls"] or tcls
        ck = (n["g"], n["a"], ext, cls)
        edges.append((n["parent"], ck, n["declared"], n["depth"]))
        if ck in winners:
            continue  # loser: nearer/earlier occurrence already won
        n["ext"], n["cls"] = ext, cls
        winners[ck] = n
        model = effective(n["g"], n["a"], n["v"])
        for d in model["deps"]:
            if d["scope"] not in ("compile", "runtime"):
                continue
            if d["optional"]:
                continue
            if excluded(d["groupId"], d["artifactId"], n["excl"]):
                continue
            if not d["version"]:
                raise RuntimeError(f"no version for {d['groupId']}:{d['artifactId']} in {ck}")
            queue.append(
                {
                    "g": d["groupId"],
                    "a": d["artifactId"],
                    "v": d["version"],
                    "type": d["type"],
                    "cls": d["classifier"],
                    "excl": n["excl"] | frozenset(d["exclusions"]),
                    "depth": n["depth"] + 1,
                    "parent": ck,
                    "declared": d["scope"],
                }
            )
    # scopes: direct dependencies keep theirs; others take the widest scope derived over all paths
    scope = {}
    for _ in range(len(winners) + 1):
        changed = False
        for parent, child, declared, _depth in edges:
            if parent is None:
                s = declared
            elif parent not in scope:
                continue
            else:
                s = declared if scope[parent] == "compile" else "runtime"
            if child not in scope or (
                SCOPE_WIDTH[s] > SCOPE_WIDTH[scope[child]] and winners[child]["depth"] > 1
            ):
                scope[child] = s
                changed = True
        if not changed:
            break
    for k, n in winners.items():
        n["scope"] = scope[k]
    return winners


# ---------------------------------------------------------------- download + lock
def download(n, libdir):
    path = gpath(n["g"], n["a"], n["v"], n["ext"], n["cls"])
    url = f"{REPO}/{path}"
    data = fetch(path)
    if data is None:
        raise FileNotFoundError(url)
    sha1_pub = fetch(path + ".sha1")
    sha1_pub = sha1_pub.decode().split()[0].strip().lower() if sha1_pub else None
    sha1 = hashlib.sha1(data).hexdigest()
    entry = {
        "groupId": n["g"],
        "artifactId": n["a"],
        "version": n["v"],
        "classifier": n["cls"] or None,
        "extension": n["ext"],
        "scope": n["scope"],
        "url": url,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "sha1_published": sha1_pub,
        "sha1_ok": sha1_pub == sha1,
    }
    if libdir:
        os.makedirs(libdir, exist_ok=True)
        dest = os.path.join(libdir, os.path.basename(path))
        if not os.path.exists(dest) or os.path.getsize(dest) != len(data):
            with open(dest, "wb") as f:
                f.write(data)
    return entry


def compare(winners, listfile):
    """Compare with `mvn dependency:list` output (g:a:type[:classifier]:version:scope lines)."""
    mvn = {}
    with open(listfile) as handle:
        lines = handle.read().splitlines()
    for line in lines:
        line = line.strip().split(" -- ")[0].strip()
        parts = line.split(":")
        if len(parts) not in (5, 6) or " " in line:
            continue
        if len(parts) == 5:
            g, a, t, v, s = parts
            c = ""
        else:
            g, a, t, c, v, s = parts
        mvn[(g, a, TYPE_MAP.get(t, (t, ""))[0], c)] = (v, s)
    ours = {k: (n["v"], n["scope"]) for k, n in winners.items()}
    only_mvn = sorted(set(mvn) - set(ours))
    only_ours = sorted(set(ours) - set(mvn))
    vdiff = sorted(k for k in set(mvn) & set(ours) if mvn[k][0] != ours[k][0])
    sdiff = sorted(k for k in set(mvn) & set(ours) if mvn[k][1] != ours[k][1])
    print(
        f"compare: maven {len(mvn)}, ours {len(ours)}, only maven {len(only_mvn)}, only ours "
        f"{len(only_ours)}, version differs {len(vdiff)}, scope differs {len(sdiff)}"
    )
    for k in only_mvn:
        print("  only in maven:", ":".join(k), mvn[k])
    for k in only_ours:
        print("  only in ours: ", ":".join(k), ours[k])
    for k in vdiff:
        print("  version:      ", ":".join(k), "maven", mvn[k][0], "ours", ours[k][0])
    for k in sdiff:
        print("  scope:        ", ":".join(k), "maven", mvn[k][1], "ours", ours[k][1])
    return not (only_mvn or only_ours or vdiff or sdiff)


def main() -> int:
    global JDK
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("version", help="the Neo4j Community version, e.g. 2026.09.0")
    parser.add_argument("--out", default=LOCK, help=f"the lock file to write (default {LOCK})")
    parser.add_argument("--compare", metavar="FILE", help="mvn dependency:list output to compare with")
    parser.add_argument("--jdk", default=JDK, help="Java version for <jdk> profile activation")
    parser.add_argument("--jobs", type=int, default=4)
    args = parser.parse_args()
    JDK = args.jdk
    root = ("org.neo4j", "neo4j", args.version, "jar", "")
    started = time.time()
    winners = resolve([root])
    print(f"resolved {len(winners)} artifacts from {len(_raw_cache)} POMs in {time.time() - started:.1f}s")
    if args.compare and not compare(winners, args.compare):
        return 1
    nodes = [n for n in winners.values() if n["ext"] != "pom"]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        found = list(pool.map(lambda n: download(n, None), nodes))
    bad = [e for e in found if not e["sha1_ok"]]
    for entry in bad:
        print("SHA-1 differs from the published one:", entry["url"], file=sys.stderr)
    if bad:
        return 1
    artifacts = sorted(
        ({"path": e["url"][len(REPO) + 1 :], "size": e["size"], "sha256": e["sha256"]} for e in found),
        key=lambda e: e["path"],
    )
    lock = {
        "neo4j": args.version,
        "root": ":".join(root[:3]),
        "main_class": MAIN_CLASS,
        "repository": REPO,
        "artifacts": artifacts,
    }
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(lock, handle, indent=1)
        handle.write("\n")
    total = sum(e["size"] for e in artifacts)
    print(f"wrote {args.out}: {len(artifacts)} jars, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
