#!/usr/bin/env bash
# clang-format over the C and C++ sources git tracks (.clang-format: Google style, 100 columns).
#   scripts/format.sh          reformats them in place
#   scripts/format.sh --check  changes nothing; lists each file clang-format would change and
#                              exits 1 if there is one (ctest clang_format; CI)
# Needs clang-format (Debian package clang-format, installed by scripts/install-deps.sh --test).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c' | grep -v '^tests/dashboards/node_modules/')
if ((${#files[@]} == 0)); then
  echo "format.sh: no sources found (not a git checkout?)" >&2
  exit 2
fi
if [[ "${1:-}" != "--check" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "needs clang-format: $f"
    bad=$((bad + 1))
  fi
done
echo "clang-format: ${#files[@]} files checked, $bad to reformat (scripts/format.sh fixes them)"
((bad == 0))
