# Extracts the C++ blocks of a Markdown file (tests/docs/snippets.sh).
# Fenced blocks (``` or ~~~, indented or not) whose info string starts with
# cpp, c++, cxx or cc. For each: writes its lines to OUT/<line>.cpp (line:
# the block's first line in the document; the fence's indentation removed)
# and prints "<line> <words of the info string after the language>".
# Variables: OUT (a directory).

function fence_of(line,    m) {
  if (match(line, /^[ \t]*(```+|~~~+)/) == 0)
    return ""
  m = substr(line, RSTART, RLENGTH)
  sub(/^[ \t]*/, "", m)
  return m
}

BEGIN { in_block = 0 }

{
  if (!in_block) {
    open = fence_of($0)
    if (open == "")
      next
    indent = match($0, /[^ \t]/) - 1
    info = substr($0, indent + length(open) + 1)
    sub(/^[ \t]+/, "", info)
    sub(/[ \t]+$/, "", info)
    n = split(info, words, /[ \t]+/)
    lang = n > 0 ? tolower(words[1]) : ""
    keep = (lang == "cpp" || lang == "c++" || lang == "cxx" || lang == "cc")
    in_block = 1
    if (keep) {
      first = NR + 1
      file = OUT "/" first ".cpp"
      printf "" > file
      attrs = ""
      for (i = 2; i <= n; ++i)
        attrs = attrs " " words[i]
      print first attrs
    }
    next
  }
  close_fence = fence_of($0)
  if (close_fence != "" && substr(close_fence, 1, 1) == substr(open, 1, 1) \
      && length(close_fence) >= length(open) \
      && $0 ~ /^[ \t]*(`+|~+)[ \t]*$/) {
    in_block = 0
    if (keep)
      close(file)
    next
  }
  if (keep) {
    line = $0
    for (i = 0; i < indent && substr(line, 1, 1) ~ /[ \t]/; ++i)
      line = substr(line, 2)
    print line > file
  }
}
