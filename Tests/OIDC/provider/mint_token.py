#!/usr/bin/env python3
"""Mint an ID token as the test provider could have issued it: signed (RS256) with the
provider's own key file, under the key id the provider publishes for it (django-oauth-toolkit
uses the JWK thumbprint). With --forge, signed with a fresh key of its own under that same key
id: what an attacker who knows the provider's JWKS but not its key can make.

Usage: mint_token.py --key KEYS/active.pem --iss ISSUER --aud CLIENT [--sub S] [--exp-in SECONDS]
                     [--iat-ago SECONDS] [--groups A,B] [--username U] [--forge]
Prints the token.
"""
import argparse
import json
import time

from jwcrypto import jwk, jwt

parser = argparse.ArgumentParser()
parser.add_argument("--key", required=True)
parser.add_argument("--iss", required=True)
parser.add_argument("--aud", required=True)
parser.add_argument("--sub", default="minted-subject")
parser.add_argument("--exp-in", type=int, default=300)
parser.add_argument("--iat-ago", type=int, default=0)
parser.add_argument("--groups", default="fleet-viewers")
parser.add_argument("--username", default="minted")
parser.add_argument("--forge", action="store_true")
options = parser.parse_args()

with open(options.key, "rb") as file:
    provider_key = jwk.JWK.from_pem(file.read())
kid = provider_key.thumbprint()
key = jwk.JWK.generate(kty="RSA", size=2048) if options.forge else provider_key
now = int(time.time())
claims = {
    "iss": options.iss, "aud": options.aud, "sub": options.sub, "iat": now - options.iat_ago,
    "exp": now + options.exp_in, "groups": [g for g in options.groups.split(",") if g],
    "preferred_username": options.username,
}
token = jwt.JWT(header={"alg": "RS256", "kid": kid, "typ": "JWT"}, claims=json.dumps(claims))
token.make_signed_token(key)
print(token.serialize())
