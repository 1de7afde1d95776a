#!/usr/bin/env python3
"""preload/'s files call only their own layer and the layers below it (preload/module.mk lists
the layers, bottom first). The calls are read from the built objects as `nm` sees them: A calls
B where A uses a symbol that B defines. Each file is one test; a failure names the edges that
go upward, with the symbols behind them.

Usage: preload_layers.py OBJECT_DIR LAYER=FILE,FILE... (bottom first)"""
import os
import subprocess
import sys


def symbols(obj):
    """The global symbols `obj` defines, and those it uses."""
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind in ("U", "v", "w"):  # undefined, or weak and undefined
            used.add(name)
        elif kind.isupper():  # lower case is local
            defined.add(name)
    return defined, used


def main():
    if len(sys.argv) < 3 or any("=" not in arg for arg in sys.argv[2:]):
        sys.exit("usage: preload_layers.py OBJECT_DIR LAYER=FILE,FILE... (bottom first)")
    objdir = sys.argv[1]
    layer_of, layers = {}, []
    for rank, arg in enumerate(sys.argv[2:]):
        layer, files = arg.split("=", 1)
        layers.append(layer)
        for f in filter(None, files.split(",")):
            if f in layer_of:
                sys.exit(f"preload_layers.py: {f} is in two layers ({layers[layer_of[f]]}, {layer})")
            layer_of[f] = rank

    files = sorted(layer_of, key=lambda f: (layer_of[f], f))
    defined, used = {}, {}
    for f in files:
        obj = os.path.join(objdir, f + ".o")
        if not os.path.exists(obj):
            sys.exit(f"preload_layers.py: {f} is in a layer, but {obj} does not exist")
        defined[f], used[f] = symbols(obj)
    definer = {}
    for f in files:
        for name in defined[f]:
            definer.setdefault(name, f)

    print(f"1..{len(files)}")
    failed = False
    for n, f in enumerate(files, 1):
        upward = {}
        for name in sorted(used[f]):
            callee = definer.get(name)
            if callee is not None and layer_of[callee] > layer_of[f]:
                upward.setdefault(callee, []).append(name)
        here = f"{f} ({layers[layer_of[f]]})"
        if not upward:
            print(f"ok {n} - {here} calls only its own layer and below")
            continue
        edges = ", ".join(f"{f} -> {callee} ({layers[layer_of[callee]]})" for callee in sorted(upward))
        print(f"not ok {n} - {here} calls a layer above it: {edges}")
        for callee in sorted(upward):
            print(f"#   {f} -> {callee}: {' '.join(upward[callee])}")
        failed = True
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
