#!/usr/bin/env bash
# Compiles every C++ block of README.md and docs/*.md against an installed
# varsync, and runs the complete programs among them (CTest: docs.snippets).
#
#   snippets.sh SOURCE_DIR BUILD_DIR WORK_DIR CXX [FLAGS]
#
# FLAGS: what programs also compile and link with (a sanitizer build's
# -fsanitize=...).
#
# What a block is, by its fence's info string and its text:
#   ```cpp   with a line starting "int main(", "CAF_MAIN(" or "VARSYNC_MAIN("
#            a complete program: compiled and linked alone as the docs say
#            (g++ ... $(pkg-config --cflags --libs varsync)), then run with
#            no arguments in an empty directory; it must exit 0 within 120 s
#   ```cpp   any other block: statements, compiled inside a function body
#   ```cpp declarations
#            types and functions, compiled at namespace scope
#   ```cpp ignore
#            not compiled (the text around it says why)
# Blocks spelt c++, cxx or cc count as cpp. The fragments (statements and
# declarations) of one document are compiled together, in document order,
# as one translation unit (-fsyntax-only): the #include lines and the
# "using namespace X;" lines at a block's top level move to file scope, so a
# block sees what it and the blocks before it include, nothing else of
# varsync; besides, it may use the standard library, CAF and the names of
# tests/docs/snippet_context.hpp (the reader's strategy `s`, actor `self`,
# model helpers). A line that is only "..." or "...;", and "{ ... }", stand
# for the reader's code and compile as "{}". Errors point at the document's
# lines (#line).
set -uo pipefail

src="$1"
build="$2"
work="$3"
cxx="$4"
extra="${5:-}"
here="$src/tests/docs"

rm -rf "$work"
mkdir -p "$work"
prefix="$work/prefix"
if ! cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1; then
  cat "$work/install.log"
  echo "snippets.sh: FAIL: cannot install $build (build every target first)"
  exit 1
fi
if command -v pkg-config >/dev/null 2>&1; then
  cflags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags varsync)"
  flags="$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs varsync)"
else
  cflags="-I$prefix/include"
  flags="$cflags -L$prefix/lib -lvarsync -lcaf_core -lspdlog -lfmt -pthread"
fi

failures=0
programs=0
fragments=0
ignored=0
fail() {
  echo "snippets.sh: FAIL: $*"
  failures=$((failures + 1))
}

# The block's text with the reader's placeholders made into C++.
placeholders() {
  sed -E -e 's/\{[[:space:]]*\.\.\.[[:space:]]*\}/{}/g' \
         -e 's/^([[:space:]]*)\.\.\.;?[[:space:]]*$/\1{}/' "$1"
}

is_lifted() { # an #include, or a using-directive at a block's top level
  grep -qE '^[[:space:]]*#[[:space:]]*include|^using namespace [A-Za-z_:]+;[[:space:]]*$' <<<"$1"
}

run_program() { # doc line block
  local doc="$1" line="$2" block="$3"
  local dir="$work/run/${doc//\//_}.$line"
  mkdir -p "$dir"
  { echo "#line $line \"$doc\""; placeholders "$block"; } >"$dir/program.cpp"
  # shellcheck disable=SC2086
  if ! "$cxx" -std=c++20 -O0 $extra -o "$dir/program" "$dir/program.cpp" $flags \
       </dev/null >"$dir/compile.log" 2>&1; then
    cat "$dir/compile.log"
    fail "$doc:$line: the program does not compile"
    return
  fi
  (cd "$dir" && LD_LIBRARY_PATH="$prefix/lib" timeout 120 ./program) \
    </dev/null >"$dir/run.log" 2>&1
  local rc=$?
  if [[ $rc != 0 ]]; then
    cat "$dir/run.log"
    fail "$doc:$line: the program exited with status $rc"
    return
  fi
  programs=$((programs + 1))
}

check_document() { # doc (relative to src)
  local doc="$1"
  local blocks="$work/blocks/${doc//\//_}"
  mkdir -p "$blocks"
  local tu="$blocks/fragments.cpp" count=0
  printf '// The fragments of %s (tests/docs/snippets.sh).\n#include "snippet_context.hpp"\n' \
    "$doc" >"$tu"
  while read -r line attrs; do
    local block="$blocks/$line.cpp"
    local kind=statements
    [[ " $attrs " == *" declarations "* ]] && kind=declarations
    [[ " $attrs " == *" ignore "* ]] && kind=ignore
    if [[ $kind == statements ]] \
       && grep -qE '^(int main\(|CAF_MAIN\(|VARSYNC_MAIN\()' "$block"; then
      kind=program
    fi
    case "$kind" in
      ignore) ignored=$((ignored + 1)); continue ;;
      program) run_program "$doc" "$line" "$block"; continue ;;
    esac
    count=$((count + 1))
    # File scope: the block's includes and using-directives, in order.
    while IFS= read -r text; do
      if is_lifted "$text"; then echo "$text" >>"$tu"; fi
    done <"$block"
    {
      echo "namespace snippets::block_$line {"
      [[ $kind == statements ]] && printf 'caf::error run() {\n{\n'
      echo "#line $line \"$doc\""
      # Lifted lines stay as blank lines: the line numbers hold.
      placeholders "$block" | while IFS= read -r text; do
        if is_lifted "$text"; then echo; else printf '%s\n' "$text"; fi
      done
      [[ $kind == statements ]] && printf '}\nreturn {};\n}\n'
      echo "} // namespace snippets::block_$line"
    } >>"$tu"
  done < <(awk -v OUT="$blocks" -f "$here/extract_blocks.awk" "$src/$doc")
  [[ $count == 0 ]] && return
  # shellcheck disable=SC2086
  if "$cxx" -std=c++20 -fsyntax-only -I"$here" "$tu" $cflags \
       </dev/null >"$blocks/compile.log" 2>&1; then
    fragments=$((fragments + count))
  else
    cat "$blocks/compile.log"
    fail "$doc: its fragments do not compile (generated: $tu)"
  fi
}

cd "$src" || exit 1
documents=(README.md docs/*.md)
for doc in "${documents[@]}"; do
  check_document "$doc"
done

echo "snippets.sh: ${#documents[@]} documents: $programs programs compiled and run, $fragments fragments compiled, $ignored blocks marked ignore"
if [[ $failures != 0 ]]; then
  echo "snippets.sh: $failures failure(s)"
  exit 1
fi
