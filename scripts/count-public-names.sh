#!/usr/bin/env bash
# Counts the public function and method names a user of varsync sees.
#
# Method: Universal Ctags (Debian package universal-ctags) lists every
# function definition and prototype (kinds f, p) in the public headers,
# include/varsync/**/*.hpp minus include/varsync/internal/. A tag is left
# out when it is private or protected, when its scope names a `detail` or
# `internal` namespace, when it is a lambda or local inside an inline body,
# or when it is an operator, a constructor or a destructor (they add no
# name). What remains is counted once per distinct unqualified name:
# overloads and the same name in two classes count once.
#
# Usage: scripts/count-public-names.sh [--list] [--core]
#   --list prints the names; --core leaves out the add-ons (include/varsync/ext/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
skip_ext=()
for arg in "$@"; do
  [[ "$arg" == --core ]] && skip_ext=(-not -path "$root/include/varsync/ext/*")
done
mapfile -t headers < <(find "$root/include/varsync" -name '*.hpp' \
  -not -path "$root/include/varsync/internal/*" "${skip_ext[@]}" | sort)
ctags --languages=C++ --language-force=C++ --kinds-C++=fp \
  --fields=+aKZs --extras=-q --sort=no -o - "${headers[@]}" |
python3 -c '
import sys
names = set()
for line in sys.stdin:
    if line.startswith("!_"):
        continue
    cols = line.rstrip("\n").split("\t")
    name, fields = cols[0], cols[3:]
    info = dict(f.split(":", 1) for f in fields if ":" in f)
    if info.get("access") in ("private", "protected"):
        continue
    scope = "::".join(v for k, v in info.items()
                      if k in ("namespace", "class", "struct", "union", "scope"))
    parts = scope.replace(":", " ").split()
    if "detail" in parts or "internal" in parts:
        continue
    cls = parts[-1] if parts else ""
    if scope.startswith("function:") or name.startswith("__anon"):
        continue  # lambdas and locals inside inline bodies
    if name.startswith("operator") or name == cls or name.startswith("~"):
        continue
    names.add(name)
if "--list" in sys.argv:
    print("\n".join(sorted(names)))
else:
    print(len(names))
' "$@"
