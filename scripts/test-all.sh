#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh Debian machine of this kind
# (nats-server for the NATS broker tests, chromium for the dashboard's browser tests), then runs
# the static checks and every test. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
{ command -v nats-server || [ -x /usr/sbin/nats-server ]; } >/dev/null 2>&1 || need+=(nats-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if ((${#need[@]})); then
  echo "installing ${need[*]} from Debian's packages…"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

npm ci
npm run check
npx vitest run
