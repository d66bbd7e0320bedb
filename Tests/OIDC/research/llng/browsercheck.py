#!/usr/bin/env python3
"""Selenium + Debian chromium through LLNG's own login page. Usage: browsercheck.py ISSUER RP_PORT USER PW"""
import sys

import requests
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

ISSUER, RP_PORT, USER, PW = sys.argv[1:5]
REDIRECT = f"http://127.0.0.1:{RP_PORT}/console/sso/callback"
disc = requests.get(ISSUER + "/.well-known/openid-configuration").json()
opts = webdriver.ChromeOptions()
for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1000,800"):
    opts.add_argument(a)
opts.binary_location = "/usr/bin/chromium"
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
try:
    d.get(disc["authorization_endpoint"] + "?response_type=code&client_id=fleetset-console&scope=openid+profile"
          f"&redirect_uri={REDIRECT}&state=st1&nonce=n1"
          "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256")
    d.save_screenshot(sys.path[0] + "/login-page.png")
    d.find_element(By.ID, "userfield").send_keys(USER)
    d.find_element(By.ID, "passwordfield").send_keys(PW)
    d.find_element(By.CSS_SELECTOR, "#lform button[type=submit]").click()
    WebDriverWait(d, 10).until(lambda d: d.current_url.startswith(REDIRECT))
    print("browser code flow landed on:", d.current_url)
    print("BROWSER OK")
finally:
    d.quit()
