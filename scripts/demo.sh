#!/usr/bin/env bash
# The main job: build Simba and run the live demo of election and handover.
# Installs what is missing with apt-get (Debian 12), builds into build-demo/, and
# runs examples/election_demo on memory://. Usage: bash scripts/demo.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=lib/packages.sh
source "$ROOT/scripts/lib/packages.sh"

ensure_packages build-essential cmake pkg-config libuv1-dev

echo "==== building (build-demo/)"
cmake -S "$ROOT" -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSIMBA_BUILD_TESTS=OFF \
  -DSIMBA_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-demo -j2 --target election_demo >/dev/null

echo "==== running the demo"
exec build-demo/examples/election_demo
