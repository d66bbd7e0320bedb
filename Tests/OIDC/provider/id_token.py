#!/usr/bin/env python3
"""Signs USER in at the test provider through its own login form (as a browser would, with
requests), runs the authorization code flow with PKCE, state and NONCE for the console's
client, and prints the ID token the provider returns: what the Swift tests then check with
fleetset's own code.

Usage: id_token.py ISSUER RP_PORT USER PASSWORD NONCE
"""
import base64
import hashlib
import re
import secrets
import sys
from urllib.parse import parse_qs, urlencode, urljoin, urlparse

import requests


def main():
    issuer, rp_port, user, password, nonce = sys.argv[1:6]
    redirect = f"http://127.0.0.1:{rp_port}/console/sso/callback"
    discovery = requests.get(issuer + "/.well-known/openid-configuration", timeout=10).json()
    session = requests.Session()
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    state = secrets.token_urlsafe(16)
    query = dict(response_type="code", client_id="fleetset-console", redirect_uri=redirect, scope="openid profile email",
                 state=state, nonce=nonce, code_challenge=challenge, code_challenge_method="S256")
    page = session.get(discovery["authorization_endpoint"] + "?" + urlencode(query), timeout=10)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = session.post(page.url, data={"csrfmiddlewaretoken": csrf, "username": user, "password": password},
                          headers={"Referer": page.url}, allow_redirects=False, timeout=10)
    answer = session.get(urljoin(answer.url, answer.headers["Location"]), allow_redirects=False, timeout=10)
    callback = parse_qs(urlparse(answer.headers["Location"]).query)
    if callback.get("state") != [state]:
        sys.exit(f"id_token.py: the provider returned another state: {callback}")
    tokens = requests.post(discovery["token_endpoint"], auth=("fleetset-console", "console-secret"),
                           data=dict(grant_type="authorization_code", code=callback["code"][0], redirect_uri=redirect,
                                     code_verifier=verifier), timeout=10)
    tokens.raise_for_status()
    # The access token first (for tests of what another client's token is worth), the ID token last.
    print("access_token " + tokens.json()["access_token"])
    print(tokens.json()["id_token"])


if __name__ == "__main__":
    main()
