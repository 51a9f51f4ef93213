#!/usr/bin/env python3
"""layers.py - the include/call-direction check of doc/design.md ("Layers").

Reads the sources under runtime/ and spank/ (their #include lines) and the
object files the build made of them (their symbols, with nm), and prints
TAP: one result per rule.

  runtime/: base < kernels < net < comm < {coll/shm, cuda} < coll < engine
            < api < ckpt < tools
  spank/:   core < plugin, core < tools

A file may include headers from its own folder and from lower layers; a
file in */core/ only from its own core and base (pure: no threads, no UCX,
no communicator); calls (an undefined symbol of one object that another
object of the same library defines) follow the same rule; no two files
call each other in a cycle; no weak symbol names a function of the tree;
hvdrun, a PMIx server, never links libhvd.

usage: layers.py SRCDIR BUILDDIR
"""

import os
import re
import subprocess
import sys

# folder -> (layer rank, group); files of one group may use each other.
RUNTIME = [
    ("runtime/base", 0),
    ("runtime/kernels", 1),
    ("runtime/net", 2),
    ("runtime/comm", 3),
    ("runtime/coll/shm", 4),
    ("runtime/cuda", 4),
    ("runtime/coll", 5),
    ("runtime/engine/core", 6),
    ("runtime/engine", 6),
    ("runtime/api", 7),
    ("runtime/ckpt/core", 8),
    ("runtime/ckpt", 8),
    ("runtime/tools", 9),
]
SPANK = [
    ("spank/core", 0),
    ("spank/plugin", 1),
    ("spank/tools", 1),
]
# pure cores may use only these (besides their own folder)
PURE_ALLOWED = {"runtime/engine/core": {"runtime/base"},
                "runtime/ckpt/core": {"runtime/base"},
                "spank/core": set()}
SOURCE_EXT = (".c", ".h", ".cu", ".cc")

n_test = 0
n_fail = 0


def ok(good, what, details=()):
    global n_test, n_fail
    n_test += 1
    if good:
        print("ok %d - %s" % (n_test, what))
    else:
        n_fail += 1
        print("not ok %d - %s" % (n_test, what))
        for d in list(details)[:40]:
            print("#   " + d)
        if len(details) > 40:
            print("#   ... and %d more" % (len(details) - 40))


def skip(what, why):
    global n_test
    n_test += 1
    print("ok %d - %s # SKIP %s" % (n_test, what, why))


def folder_of(path, table):
    """The longest folder of table that holds path, or None."""
    best = None
    for folder, rank in table:
        if path.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, rank)
    return best


def tool_of(path):
    """runtime/tools/X/... and spank/tools/...: each tool its own group."""
    parts = path.split("/")
    if len(parts) > 3 and parts[1] == "tools":
        return "/".join(parts[:3])
    return None


def allowed(src, dst, table):
    """May a file in folder src use folder dst?  (reason or None)"""
    fs, fd = folder_of(src, table), folder_of(dst, table)
    if fs is None or fd is None:
        return None
    if fs[0] == fd[0]:
        ts, td = tool_of(src), tool_of(dst)
        if ts and td and ts != td:
            return "%s uses another tool's file %s" % (src, dst)
        return None
    if fs[0] in PURE_ALLOWED:
        if fd[0] not in PURE_ALLOWED[fs[0]]:
            return "%s is pure (%s) but uses %s" % (src, fs[0], dst)
        return None
    # a folder may use its own core (engine -> engine/core)
    if fd[0] == fs[0] + "/core":
        return None
    if fd[1] < fs[1]:
        return None
    if fd[1] == fs[1]:
        return "%s uses %s: %s and %s are side by side, neither may " \
               "use the other" % (src, dst, fs[0], fd[0])
    return "%s (%s) uses %s, a higher layer (%s)" % (src, fs[0], dst, fd[0])


def sources(srcdir, top):
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(srcdir, top)):
        dirnames.sort()
        for f in sorted(filenames):
            if f.endswith(SOURCE_EXT):
                out.append(os.path.relpath(os.path.join(dirpath, f), srcdir))
    return out


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_target(srcdir, path, name, top, files):
    """The tree file an #include names (folder-qualified from top, or
    beside the including file), or None for headers outside the tree."""
    for cand in (os.path.join(top, name),
                 os.path.join(os.path.dirname(path), name)):
        cand = os.path.normpath(cand)
        if cand in files:
            return cand
    return None


def check_includes(srcdir, top, table):
    files = set(sources(srcdir, top))
    bad = []
    edges = set()
    for path in sorted(files):
        with open(os.path.join(srcdir, path), errors="replace") as f:
            text = f.read()
        for name in INCLUDE.findall(text):
            tgt = include_target(srcdir, path, name, top, files)
            if tgt is None or tgt == path:
                continue
            edges.add((path, tgt))
            why = allowed(path, tgt, table)
            if why:
                bad.append("#include \"%s\": %s" % (name, why))
    ok(not bad, "%s/: every #include goes to its own folder or a lower "
       "layer (%d includes)" % (top, len(edges)), bad)
    # modules: a source and its headers are one (x.c, x.h, x_impl.h)
    mods = {(stem(a), stem(b)) for a, b in edges if stem(a) != stem(b)}
    circ = cycles({m for e in mods for m in e}, mods)
    ok(not circ, "%s/: no files that include each other in a cycle" % top,
       ["cycle: " + " -> ".join(c) for c in circ])
    return edges


def stem(path):
    """The module of a file: x.c, x.h and its private x_impl.h are one."""
    base = os.path.splitext(path)[0]
    return base[:-5] if base.endswith("_impl") else base


def floors(nodes, edges):
    """A file's floor: one more than the highest floor it uses (1: uses
    nothing of the tree).  Only meaningful without cycles."""
    uses = {n: {b for a, b in edges if a == n and b != n} for n in nodes}
    memo = {}

    def floor(n, seen=()):
        if n in memo:
            return memo[n]
        if n in seen:
            return 0
        f = 1 + max([floor(m, seen + (n,)) for m in uses.get(n, ())] or [0])
        memo[n] = f
        return f

    return {n: floor(n) for n in nodes}


def nm(obj, *flags):
    r = subprocess.run(["nm", "-P"] + list(flags) + [obj],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        return []
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.append((parts[0], parts[1]))
    return out


def objects(srcdir, builddir, top, prefixes):
    """source -> its object file in the build, for the sources of top."""
    found = {}
    for path in sources(srcdir, top):
        if not path.endswith((".c", ".cu", ".cc")):
            continue
        d, f = os.path.split(os.path.relpath(path, top))
        base = os.path.splitext(f)[0]
        for pre in prefixes:
            for sub in (".libs", ""):
                obj = os.path.join(builddir, top, d, sub, pre + base + ".o")
                if os.path.exists(obj):
                    found.setdefault(path, obj)
    return found


def cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan)."""
    graph = {n: sorted({b for a, b in edges if a == n}) for n in nodes}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check_calls(srcdir, builddir, top, table, prefixes, what):
    objs = objects(srcdir, builddir, top, prefixes)
    if not objs:
        skip("%s: calls" % what, "no objects of it in this build")
        return
    defined = {}
    for src, obj in objs.items():
        for sym, kind in nm(obj, "--defined-only"):
            if kind in "TtDdBbRrVWi" and not sym.startswith("."):
                defined.setdefault(sym, set()).add(src)
    bad, weak, edges = [], [], set()
    for src, obj in sorted(objs.items()):
        for sym, kind in nm(obj, "--undefined-only"):
            owners = defined.get(sym, set()) - {src}
            if kind in "wv" and owners:
                weak.append("%s: weak reference to %s (defined in %s)"
                            % (src, sym, ", ".join(sorted(owners))))
            for o in owners:
                edges.add((src, o))
                why = allowed(src, o, table)
                if why:
                    bad.append("%s calls %s: %s" % (src, sym, why))
    ok(not bad, "%s: every call goes to its own folder or a lower layer "
       "(%d objects, %d file-to-file calls)" % (what, len(objs), len(edges)),
       sorted(set(bad)))
    ok(not weak, "%s: no weak symbol names a function of the tree" % what,
       weak)
    circ = cycles(set(objs), edges)
    ok(not circ, "%s: no files that call each other in a cycle" % what,
       ["cycle: " + " -> ".join(c) for c in circ])
    fl = floors(set(objs), edges)
    up = sum(1 for a, b in edges if fl.get(b, 0) >= fl.get(a, 0))
    print("# %s: %d floors by calls; %d calls that do not go down a floor"
          % (what, max(fl.values() or [0]), up))


def needed(binary):
    r = subprocess.run(["readelf", "-d", binary], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    return re.findall(r"\(NEEDED\).*\[(.*)\]", r.stdout)


def main():
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    srcdir, builddir = sys.argv[1], sys.argv[2]
    check_includes(srcdir, "runtime", RUNTIME)
    check_includes(srcdir, "spank", SPANK)
    check_calls(srcdir, builddir, "runtime", RUNTIME,
                ["libhvd_la-", "libhvd_cuda_la-"], "libhvd")
    check_calls(srcdir, builddir, "spank", SPANK,
                ["libhvdhints_la-", "horovod_la-", "hvd_topo-", ""],
                "spank/")
    for cand in ("runtime/.libs/hvdrun", "runtime/hvdrun"):
        b = os.path.join(builddir, cand)
        if os.path.exists(b) and open(b, "rb").read(4) == b"\x7fELF":
            libs = needed(b)
            ok(not any(l.startswith("libhvd") for l in libs),
               "hvdrun is a PMIx server, not a libhvd program "
               "(links %s)" % ", ".join(libs))
            break
    else:
        skip("hvdrun links no libhvd", "hvdrun is not built here")
    print("1..%d" % n_test)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
