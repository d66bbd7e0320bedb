#!/usr/bin/env python3
"""LemonLDAP::NG: code flow + PKCE + state + nonce with plain HTTP, ID token checked against
JWKS, userinfo, and key rotation (new config version). Usage: flowcheck.py ISSUER LLNG_DIR RP_PORT"""
import base64, hashlib, json, re, secrets, subprocess, sys, time
from html import unescape
from urllib.parse import parse_qs, urlencode, urlparse

import requests
from jwcrypto import jwk, jwt

ISSUER, D, RP_PORT = sys.argv[1], sys.argv[2], sys.argv[3]
REDIRECT = f"http://127.0.0.1:{RP_PORT}/console/sso/callback"
disc = requests.get(ISSUER + "/.well-known/openid-configuration").json()


def code_flow(user, pw):
    s = requests.Session()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state, nonce = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    url = disc["authorization_endpoint"] + "?" + urlencode(dict(
        response_type="code", client_id="fleetset-console", redirect_uri=REDIRECT, scope="openid profile email groups",
        state=state, nonce=nonce, code_challenge=challenge, code_challenge_method="S256"))
    r = s.get(url)
    form = re.search(r'<form id="lform".*?</form>', r.text, re.S).group(0)
    fields = {unescape(n): unescape(v) for n, v in re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', form)}
    fields.update(user=user, password=pw)
    r = s.post(url, data=fields, allow_redirects=False)
    loc = r.headers.get("Location", "")
    assert r.status_code in (302, 303) and loc.startswith(REDIRECT), (r.status_code, loc, r.text[:300])
    cb = parse_qs(urlparse(loc).query)
    assert cb["state"] == [state]
    tok = requests.post(disc["token_endpoint"], auth=("fleetset-console", "console-secret"),
                        data=dict(grant_type="authorization_code", code=cb["code"][0], redirect_uri=REDIRECT,
                                  code_verifier=verifier))
    tok.raise_for_status()
    tok = tok.json()
    keys = jwk.JWKSet.from_json(requests.get(disc["jwks_uri"]).text)
    t = jwt.JWT(jwt=tok["id_token"], key=keys, algs=["RS256"], check_claims={"iss": ISSUER, "exp": None})
    claims = json.loads(t.claims)
    assert claims["nonce"] == nonce
    ui = requests.get(disc["userinfo_endpoint"], headers={"Authorization": "Bearer " + tok["access_token"]}).json()
    return t.token.jose_header, claims, ui


t0 = time.time()
U1, P1 = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else ("dwho", "dwho")
hdr, claims, ui = code_flow(U1, P1)
print("code flow OK in %.2fs header=%s" % (time.time() - t0, hdr))
print("  id_token:", claims)
print("  userinfo:", ui)
subprocess.run(["sh", sys.path[0] + "/rotate-key.sh", D], check=True)
time.sleep(2)
jw = requests.get(disc["jwks_uri"]).json()
hdr2, _, _ = code_flow(U1, P1)
print("rotation: jwks kids now", [k.get("kid") for k in jw["keys"]], "new id_token kid", hdr2.get("kid"), "old", hdr.get("kid"))
assert hdr2["kid"] != hdr["kid"]
print("ALL OK")
