#!/bin/sh
# Usage: rotate-key.sh OP_DIR
# New RSA key becomes the signing key; the old one stays published in the JWKS
# (DOT's OIDC_RSA_PRIVATE_KEYS_INACTIVE). SIGHUP makes the running OP reload.
set -eu
OP_DIR=$1
K=$OP_DIR/keys
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$K/new.pem" 2>/dev/null
mv "$K/active.pem" "$K/inactive/$(date +%s%N).pem"
mv "$K/new.pem" "$K/active.pem"
# to drop old keys from the JWKS as well: rm "$K"/inactive/*.pem before the HUP
kill -HUP "$(cat "$OP_DIR/pid")"
