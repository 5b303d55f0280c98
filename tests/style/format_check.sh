#!/usr/bin/env bash
# tests/style (label style): the C and C++ sources follow .clang-format
# (Google style, 100 columns; STYLE.md): src/, tools/, bench/, tests/ and the
# bindings' C glue.
# Reformat with: clang-format-14 -i FILE... (the version pinned here: another
# clang-format may lay the same code out differently).
#   format_check.sh SOURCE_DIR
set -uo pipefail
root=${1:?usage: format_check.sh SOURCE_DIR}
fmt=$(command -v clang-format-14) || { echo "clang-format-14 not installed: skipped"; exit 77; }
mapfile -t files < <(cd "$root" && find src tools bench tests bindings/go bindings/lua/src bindings/java/src/main/c \
  bindings/rust/simba-sys/csrc -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | sort)
# One clang-format for every file (a process per file took half a minute); it
# names each file it would change, as FILE:LINE:COL: error: ...
out=$(cd "$root" && "$fmt" --dry-run -Werror "${files[@]}" 2>&1)
rc=$?
mapfile -t bad < <(sed -n -E 's/^([^:]+):[0-9]+:[0-9]+: error: .*clang-format.*/\1/p' <<<"$out" | sort -u)
if ((rc != 0 && ${#bad[@]} == 0)); then
  echo "clang-format-14 failed (exit $rc):"
  echo "$out"
  exit 1
fi
if ((${#bad[@]})); then
  echo "not formatted (clang-format-14 -i ${bad[*]}):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "${#files[@]} files formatted"
