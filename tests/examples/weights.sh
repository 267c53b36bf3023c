# Sourced by the example tests that compare a run's final weights with the
# single-process run's ("weights <hexfloats>" lines of --print-weights).

weights_of() { grep '^weights ' "$1" | head -1 | cut -d' ' -f2-; }

# same_weights WANT GOT LABEL: equal bitwise, or as numbers within 1e-5
# relative (a sum over processes adds in another order); exits 1 otherwise.
same_weights() {
  local want=$1 got=$2 label=$3
  [ "$got" = "$want" ] && return 0
  # Not bitwise: compare as numbers (bash's printf reads hexfloats).
  local -a a b
  read -r -a a <<<"${want/ b / }"
  read -r -a b <<<"${got/ b / }"
  if [ "${#a[@]}" != "${#b[@]}" ]; then
    echo "FAILED: $label: ${#b[@]} weights, expected ${#a[@]}"; exit 1
  fi
  local i x y
  for i in "${!a[@]}"; do
    x=$(printf '%.9g' "${a[$i]}"); y=$(printf '%.9g' "${b[$i]}")
    awk -v x="$x" -v y="$y" 'BEGIN { d = x - y; if (d < 0) d = -d;
      m = (x < 0 ? -x : x); exit !(d <= 1e-5 * (m > 1 ? m : 1)) }' \
      || { echo "FAILED: weight $i: $x (1 process) vs $y ($label)"; exit 1; }
  done
}
