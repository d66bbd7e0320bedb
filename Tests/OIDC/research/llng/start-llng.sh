#!/bin/sh
# Usage: start-llng.sh PORT  -- throwaway LemonLDAP::NG 2.16 portal (OIDC OP) as non-root-capable
# plackup process; all state under a fresh temp dir. Demo auth backend (dwho/dwho, rtyler/rtyler, msmith/msmith).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PORT=$1; RP_PORT=${RP_PORT:-9000}
D=${LLNG_DIR:-$(mktemp -d /tmp/llng.XXXXXX)}
mkdir -p "$D/conf" "$D/sessions/lock" "$D/psessions/lock" "$D/cache" "$D/oidc/lock" "$D/notifications"
[ -f "$D/sig.key" ] || { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/sig.key" 2>/dev/null
  openssl pkey -in "$D/sig.key" -pubout -out "$D/sig.pub"; }
cat > "$D/lemonldap-ng.ini" <<INI
[all]
logLevel = ${LLNG_LOGLEVEL:-warn}
checkTime = 1
[configuration]
type = File
dirName = $D/conf
localStorage = Cache::FileCache
localStorageOptions = { 'namespace' => 'llng-config', 'default_expires_in' => 5, 'cache_root' => '$D/cache' }
[portal]
staticPrefix = /static
templateDir = /usr/share/lemonldap-ng/portal/templates
languages = en
INI
python3 "$HERE/make-conf.py" "$D" "$PORT" "$RP_PORT" > "$D/conf/lmConf-1.json"
LLNG_DEFAULTCONFFILE="$D/lemonldap-ng.ini" plackup -s HTTP::Server::PSGI --host 127.0.0.1 --port "$PORT" \
  -e 'use Plack::Builder; builder { enable "Static", path => qr{^/static/}, root => "/usr/share/lemonldap-ng/portal/htdocs"; require Lemonldap::NG::Portal::Main; Lemonldap::NG::Portal::Main->run({}) }' \
  > "$D/server.log" 2>&1 &
echo $! > "$D/pid"
i=0; until curl -sf "http://127.0.0.1:$PORT/.well-known/openid-configuration" >/dev/null; do
  i=$((i+1)); [ $i -lt 100 ] || { cat "$D/server.log" >&2; exit 1; }; sleep 0.1; done
echo "LLNG_DIR=$D PID=$(cat "$D/pid") ISSUER=http://127.0.0.1:$PORT"
