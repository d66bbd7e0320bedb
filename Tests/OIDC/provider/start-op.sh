#!/bin/sh
# Usage: start-op.sh PORT [SPEC.json]
# Starts a throwaway OpenID Provider on 127.0.0.1:PORT with its state in a fresh
# temp dir. Prints "OP_DIR=... PID=..." and returns once discovery answers.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${OP_PYTHON:-$HERE/../../../.build/python-tools/bin/python}
PORT=$1
SPEC=${2:-$HERE/spec.example.json}
OP_DIR=${OP_DIR:-$(mktemp -d /tmp/op.XXXXXX)}
export OP_DIR OP_ISSUER="http://127.0.0.1:$PORT" DJANGO_SETTINGS_MODULE=opsite.settings PYTHONPATH="$HERE"
mkdir -p "$OP_DIR/keys/inactive"
[ -f "$OP_DIR/keys/active.pem" ] || openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$OP_DIR/keys/active.pem" 2>/dev/null
# migrating an empty sqlite db costs ~4 s on this machine: do it once, then copy
CACHE_DB=${OP_DB_CACHE:-$HERE/../../../.build/oidc-provider/op-migrated.sqlite3}
if [ ! -f "$OP_DIR/op.sqlite3" ]; then
  if [ ! -f "$CACHE_DB" ]; then
    mkdir -p "$(dirname "$CACHE_DB")"
    "$PY" -m django migrate -v0 --noinput
    cp "$OP_DIR/op.sqlite3" "$CACHE_DB.tmp.$$" && mv "$CACHE_DB.tmp.$$" "$CACHE_DB"
  else
    cp "$CACHE_DB" "$OP_DIR/op.sqlite3"
  fi
fi
sed "s/@RP_PORT@/${RP_PORT:-9000}/g" "$SPEC" > "$OP_DIR/spec.json"
"$PY" -m django seed "$OP_DIR/spec.json" >/dev/null
# --noreload: single process, SIGHUP handler installed; --insecure: serve admin CSS with DEBUG=False
"$PY" -m django runserver --noreload --insecure "127.0.0.1:$PORT" >"$OP_DIR/server.log" 2>&1 &
PID=$!
echo $PID > "$OP_DIR/pid"
i=0
until curl -sf "$OP_ISSUER/.well-known/openid-configuration" >/dev/null; do
  i=$((i+1)); [ $i -lt 200 ] || { echo "OP did not start" >&2; cat "$OP_DIR/server.log" >&2; exit 1; }
  kill -0 $PID 2>/dev/null || { cat "$OP_DIR/server.log" >&2; exit 1; }
  sleep 0.1
done
echo "OP_DIR=$OP_DIR PID=$PID ISSUER=$OP_ISSUER"
