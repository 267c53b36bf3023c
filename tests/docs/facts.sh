#!/usr/bin/env bash
# Lists of the documentation that the code defines (CTest: docs.facts):
#  - every code of varsync::errc (include/varsync/error.hpp) is in the
#    README's list of errors (between "varsync::errc" and
#    "varsync::describe(err)");
#  - every atom of include/varsync/atoms.hpp is among "The public atoms"
#    of docs/actor-protocol.md;
#  - every <varsync/...> header the README and docs/ name is a public
#    header (include/varsync/, or generated: version.hpp).
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

errors="$(section README.md 'varsync::errc' 'varsync::describe(err)')"
codes="$(sed -n '/^enum class errc/,/^};/p' include/varsync/error.hpp \
         | grep -oE '^  [a-z_]+' | tr -d ' ' | grep -v '^none$')"
[[ -n "$codes" ]] || fail "no codes found in include/varsync/error.hpp"
for code in $codes; do
  grep -qF "\`$code\`" <<<"$errors" \
    || fail "README.md's list of errors lacks \`$code\`"
done

public_atoms="$(section docs/actor-protocol.md 'The public atoms' '')"
atoms="$(grep -oE 'caf::atom\("[a-z_]+"\)' include/varsync/atoms.hpp \
         | sed -E 's/caf::atom\("([a-z_]+)"\)/\1/')"
[[ -n "$atoms" ]] || fail "no atoms found in include/varsync/atoms.hpp"
for atom in $atoms; do
  grep -qF "\`$atom\`" <<<"$public_atoms" \
    || fail "docs/actor-protocol.md's public atoms lack \`$atom\`"
done

for header in $(grep -ohE '<varsync/[a-z_]+\.hpp>' README.md docs/*.md \
                | sort -u | tr -d '<>'); do
  # version.hpp is generated from cmake/version.hpp.in.
  [[ -f "include/$header" || -f "cmake/$(basename "$header").in" ]] \
    || fail "the docs name <$header>, which is not a public header"
done

n_codes=$(wc -w <<<"$codes")
n_atoms=$(wc -w <<<"$atoms")
echo "facts.sh: $n_codes error codes, $n_atoms public atoms checked"
[[ $failures == 0 ]] || exit 1
