# ensure_packages PKG...: installs the Debian packages that are missing, with
# apt-get (as root, or through sudo), updating the package lists only then.
# Sourced by scripts/test.sh and scripts/demo.sh. SIMBA_NO_INSTALL=1 only reports.
ensure_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "not Debian (no dpkg-query): make sure these are installed: $*" >&2
    return 0
  fi
  local missing=() p
  for p in "$@"; do
    if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != "installed" ]]; then
      missing+=("$p")
    fi
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ "${SIMBA_NO_INSTALL:-0}" == 1 ]]; then
    echo "missing packages (not installing): ${missing[*]}" >&2
    return 0
  fi
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo -n)
    else
      echo "missing packages and not root: apt-get install ${missing[*]}" >&2
      return 1
    fi
  fi
  echo "==== installing missing packages: ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

# What the benchmarks need (scripts/bench.sh, scripts/scale.sh): the build, and
# the three servers with their client libraries.
SIMBA_BENCH_PACKAGES=(
  build-essential cmake pkg-config
  libuv1-dev libhiredis-dev libpq-dev
  redis-server redis-tools
  postgresql openssl
  zookeeper libzookeeper-st-dev default-jre-headless
)
