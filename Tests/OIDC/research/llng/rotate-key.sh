#!/bin/sh
# Usage: rotate-key.sh LLNG_DIR -- LLNG 2.16 has ONE signing key: write config version N+1 with a
# new key + key id; the portal picks it up after checkTime (1 s here). The old key leaves the JWKS.
set -eu
D=$1
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$D/sig.key" 2>/dev/null
openssl pkey -in "$D/sig.key" -pubout -out "$D/sig.pub"
python3 - "$D" <<'PY'
import glob, json, sys, time
D = sys.argv[1]
last = max(glob.glob(f"{D}/conf/lmConf-*.json"), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
c = json.load(open(last))
c["cfgNum"] += 1
c["cfgDate"] = str(int(time.time()))
c["oidcServicePrivateKeySig"] = open(f"{D}/sig.key").read()
c["oidcServicePublicKeySig"] = open(f"{D}/sig.pub").read()
c["oidcServiceKeyIdSig"] = "key-%d" % time.time_ns()
json.dump(c, open(f"{D}/conf/lmConf-{c['cfgNum']}.json", "w"), indent=1)
PY
