#!/usr/bin/env bash
# Lists of the documentation that the code defines (CTest: docs.facts):
#  - every code of varsync::errc (include/varsync/error.hpp) is in the
#    guide's list of errors (docs/guide.md, between "varsync::errc" and
#    "varsync::describe(err)");
#  - every atom of include/varsync/actor_protocol.hpp is among "The public atoms"
#    of docs/actor-protocol.md;
#  - every <varsync/...> header the README and docs/ name is a public
#    header (include/varsync/ and its ext/, or generated: version.hpp),
#    never one of internal/;
#  - every rule id the README and docs/ cite (C2, X1–X5, ...) is a row of
#    docs/semantics.md;
#  - every relative link of the README and docs/ ([text](path)) and every
#    source file they name (`sync/policy.hpp`, scripts/bench.sh, ...)
#    exists.
#
#   facts.sh SOURCE_DIR
set -uo pipefail

cd "$1" || exit 1
failures=0
fail() {
  echo "facts.sh: FAIL: $*"
  failures=$((failures + 1))
}

# The text of $1 from the first line that holds $2 to the next that holds
# $3 (empty $3: to the end of the paragraph).
section() {
  awk -v from="$2" -v to="$3" '
    !on && index($0, from) { on = 1 }
    on && to == "" && $0 == "" { exit }
    on { print }
    on && to != "" && index($0, to) { exit }' "$1"
}

errors="$(section docs/guide.md 'varsync::errc' 'varsync::describe(err)')"
codes="$(sed -n '/^enum class errc/,/^};/p' include/varsync/error.hpp \
         | grep -oE '^  [a-z_]+' | tr -d ' ' | grep -v '^none$')"
[[ -n "$codes" ]] || fail "no codes found in include/varsync/error.hpp"
for code in $codes; do
  grep -qF "\`$code\`" <<<"$errors" \
    || fail "docs/guide.md's list of errors lacks \`$code\`"
done

public_atoms="$(section docs/actor-protocol.md 'The public atoms' '')"
atoms="$(grep -oE 'caf::atom\("[a-z_]+"\)' include/varsync/actor_protocol.hpp \
         | sed -E 's/caf::atom\("([a-z_]+)"\)/\1/')"
[[ -n "$atoms" ]] || fail "no atoms found in include/varsync/actor_protocol.hpp"
for atom in $atoms; do
  grep -qF "\`$atom\`" <<<"$public_atoms" \
    || fail "docs/actor-protocol.md's public atoms lack \`$atom\`"
done

for header in $(grep -ohE '<varsync/[a-z_/]+\.hpp>' README.md docs/*.md \
                | sort -u | tr -d '<>'); do
  # version.hpp is generated from cmake/version.hpp.in.
  [[ -f "include/$header" || -f "cmake/$(basename "$header").in" ]] \
    || fail "the docs name <$header>, which is not a public header"
  [[ "$header" != varsync/internal/* ]] \
    || fail "the docs name <$header>, which users must not include"
done

documents=(README.md docs/*.md)

# Rule ids: the first column of docs/semantics.md's tables.
rules="$(grep -oE '^\| [A-Z][0-9]+ \|' docs/semantics.md | grep -oE '[A-Z][0-9]+')"
[[ -n "$rules" ]] || fail "no rule ids found in docs/semantics.md"
cited=0
while IFS=: read -r doc id; do
  cited=$((cited + 1))
  grep -qxF "$id" <<<"$rules" \
    || fail "$doc cites rule $id, which is not a row of docs/semantics.md"
done < <(grep -oE '(^|[^-A-Za-z0-9_/.])[CDKMNOPRSVWX][0-9]{1,2}([^A-Za-z0-9_]|$)' \
           "${documents[@]}" \
         | sed -E 's/^([^:]+):[^A-Z]*([A-Z][0-9]+).*/\1:\2/' | sort -u)

# Relative links, from the linking document's folder (outside code blocks,
# where "[](type)" is a lambda).
links=0
while IFS=: read -r doc target; do
  links=$((links + 1))
  target="${target%%#*}"
  [[ -z "$target" ]] && continue
  [[ -e "$(dirname "$doc")/$target" ]] \
    || fail "$doc links to $target, which does not exist"
done < <(awk '/^[[:space:]]*```/ { code = !code; next }
              !code { line = $0
                      while (match(line, /\]\([^)[:space:]]+\)/)) {
                        print FILENAME ":" substr(line, RSTART + 2, RLENGTH - 3)
                        line = substr(line, RSTART + RLENGTH) } }' \
           "${documents[@]}" \
         | grep -vE ':(https?|mailto):' | sort -u)

# Source files named in the text, from the repository root ("a.hpp/.cpp"
# names both).
paths=0
top='actors|api|bench|cmake|core|devices|docs|examples|fuzz|include|messages|scripts|sync|tests'
ext='hpp|cpp|cu|c|h|sh|cmake|py|md|in|txt'
while IFS=: read -r doc path; do
  paths=$((paths + 1))
  base="${path%%/.*}"
  [[ -e "$base" || -e "include/$base" ]] \
    || fail "$doc names $base, which does not exist"
done < <(grep -oE "(^|[^-A-Za-z0-9_./])($top)/[A-Za-z0-9_./-]*\.($ext)\b" \
           "${documents[@]}" \
         | sed -E 's/^([^:]+):[^a-z]*(.*)$/\1:\2/' | sort -u)

n_codes=$(wc -w <<<"$codes")
n_atoms=$(wc -w <<<"$atoms")
echo "facts.sh: $n_codes error codes, $n_atoms public atoms, $cited rule ids," \
     "$links links, $paths file names checked"
[[ $failures == 0 ]] || exit 1
