#!/usr/bin/env python3
"""Single sign-on in a real browser against a real OpenID Provider (django-oauth-toolkit,
Tests/OIDC/provider) and a real fleetset-server (SingleSignOnTests in Tests/FleetsetCLITests
starts both and runs this).

People sign in through the provider's own login page; each lands on the console with the role
their groups map to: an admin sees the Apps page, an editor of kiosk is refused payments, a
person whose groups grant nothing is refused. Without a browser (plain HTTP, as an attacker
would replay it): a state used twice, and a callback from a browser that did not start the
sign-in, are refused. After a key rotation at the provider, a sign-in still works. Last, the
CLI's device grant: `fleetset admin login --sso` prints a code, a person approves it in the
browser, and `fleetset admin devices` runs with the token it kept.

Every step asserts what a person would see; any failure ends the run with exit status 1.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from urllib.parse import urljoin

import requests
from selenium.webdriver.common.by import By

from console_browser import Console, Failed, add_browser_arguments, check, check_page, report, run_steps, wait_until


class SingleSignOn:
    def __init__(self, options):
        self.options = options
        self.results = {}
        self.drivers = []
        self.driver = self.fresh_browser()
        self.config = tempfile.mkdtemp(prefix="fleetset-sso-cli-")

    def fresh_browser(self):
        """A browser of its own (no cookie of the provider's from another person)."""
        driver = Console.browser(self, javascript=True)
        self.drivers.append(driver)
        return driver

    def text(self, driver):
        return driver.find_element(By.CSS_SELECTOR, "body").text

    def provider_login(self, driver, user, password):
        wait_until("the provider's login page", lambda: "/accounts/login/" in driver.current_url)
        check(driver.current_url.startswith(self.options.issuer), f"the login page should be the provider's: {driver.current_url}")
        driver.find_element(By.ID, "id_username").send_keys(user)
        driver.find_element(By.ID, "id_password").send_keys(password)
        driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    def sso_sign_in(self, driver, user, password):
        driver.get(self.options.server + "/console/sign-in")
        driver.find_element(By.CSS_SELECTOR, ".sso-sign-in a").click()
        self.provider_login(driver, user, password)

    # MARK: - The steps

    def run(self):
        steps = [self.admin_signs_in, self.editor_is_refused_payments, self.no_role_is_refused, self.local_name_is_not_taken_over,
                 self.replayed_state_is_refused, self.other_browser_is_refused, self.sign_in_after_key_rotation,
                 self.cli_device_grant]
        run_steps(steps, self.driver, self.options.screenshots)

    def admin_signs_in(self):
        self.driver.get(self.options.server + "/console/sign-in")
        check("Sign in with Test OP" in self.text(self.driver), "the sign-in page should offer the provider")
        check_page(self.driver, "sign-in-with-sso", self.options.screenshots, self.results)
        self.sso_sign_in(self.driver, "alice", "alice-pw")
        wait_until("the apps page", lambda: self.driver.current_url.endswith("/console/apps"))
        check("Apps" in self.driver.title, f"the Apps page, not {self.driver.title}")
        check("kiosk" in self.text(self.driver) and "payments" in self.text(self.driver), "an admin sees every app")
        check_page(self.driver, "apps-after-sso", self.options.screenshots, self.results)

    def editor_is_refused_payments(self):
        driver = self.fresh_browser()
        self.sso_sign_in(driver, "carol", "carol-pw")
        wait_until("the apps page", lambda: driver.current_url.endswith("/console/apps"))
        driver.get(self.options.server + "/console/apps/payments")
        wait_until("the refusal of payments", lambda: "not for app payments" in self.text(driver))
        check(not driver.find_elements(By.CSS_SELECTOR, 'form[action^="/console/apps/payments/settings"]'),
              "no settings form for payments")
        driver.get(self.options.server + "/console/apps/kiosk")
        wait_until("kiosk's settings", lambda: driver.find_elements(By.CSS_SELECTOR, 'form[action^="/console/apps/kiosk/settings"]'))

    def no_role_is_refused(self):
        driver = self.fresh_browser()
        self.sso_sign_in(driver, "dave", "dave-pw")
        wait_until("the refusal", lambda: "grant no role" in self.text(driver))
        check("/console/sso/callback" in driver.current_url, f"refused on the callback: {driver.current_url}")
        check(not any(c["name"] == "fleetset_console" for c in driver.get_cookies()), "no session for a person without a role")
        check_page(driver, "sso-refused", self.options.screenshots, self.results)

    def local_name_is_not_taken_over(self):
        # The server has a local account named bob (made by the test); the provider's bob is someone else.
        driver = self.fresh_browser()
        self.sso_sign_in(driver, "bob", "bob-pw")
        wait_until("the refusal", lambda: "not bound to this identity" in self.text(driver))
        check(not any(c["name"] == "fleetset_console" for c in driver.get_cookies()), "no session as the local bob")

    def callback_url(self, session, user, password):
        """Starts a sign-in with `session` (a browser without JavaScript: plain HTTP) and signs in
        at the provider's form; returns the callback URL the provider sends it to."""
        started = session.get(self.options.server + "/console/sso/start", allow_redirects=False)
        check(started.status_code == 303, f"start: {started.status_code}")
        page = session.get(started.headers["Location"], allow_redirects=True)
        check("/accounts/login/" in page.url, f"the provider's login page: {page.url}")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        posted = session.post(page.url, data={"csrfmiddlewaretoken": csrf, "username": user, "password": password},
                              headers={"Referer": page.url}, allow_redirects=False)
        back = session.get(urljoin(page.url, posted.headers["Location"]), allow_redirects=False)
        location = back.headers.get("Location", "")
        check(location.startswith(self.options.server + "/console/sso/callback?"), f"the provider's redirect: {location}")
        return location

    def replayed_state_is_refused(self):
        session = requests.Session()
        callback = self.callback_url(session, "carol", "carol-pw")
        first = session.get(callback, allow_redirects=False)
        check(first.status_code == 200 and "fleetset_console=" in first.headers.get("Set-Cookie", ""),
              f"the first callback signs in: {first.status_code}")
        again = requests.get(callback, cookies={"fleetset_sso_state": re.search(r"state=([^&]+)", callback).group(1)},
                             allow_redirects=False)
        check(again.status_code == 401 and "used already" in again.text, f"a replayed state is refused: {again.status_code}")
        check("fleetset_console=" not in again.headers.get("Set-Cookie", "").replace("fleetset_console=;", ""),
              "no session for a replayed state")

    def other_browser_is_refused(self):
        victim = requests.Session()
        callback = self.callback_url(victim, "carol", "carol-pw")
        # Another browser (an attacker's link in someone else's browser: a login CSRF) carries no state cookie.
        other = requests.get(callback, allow_redirects=False)
        check(other.status_code == 401 and "another browser" in other.text, f"a callback without the state cookie: {other.status_code}")
        # And the attempt is spent: the browser that started it cannot finish it now either.
        late = victim.get(callback, allow_redirects=False)
        check(late.status_code == 401, f"the spent attempt: {late.status_code}")

    def sign_in_after_key_rotation(self):
        subprocess.run([self.options.rotate, self.options.provider_dir], check=True, capture_output=True)
        time.sleep(1.5)  # the server reads the keys again at most once a second here (--oidc-keys-refresh-interval 1)
        driver = self.fresh_browser()
        self.sso_sign_in(driver, "alice", "alice-pw")
        wait_until("the apps page after the rotation", lambda: driver.current_url.endswith("/console/apps"))

    def cli_device_grant(self):
        environment = dict(os.environ, XDG_CONFIG_HOME=self.config)
        login = subprocess.Popen([self.options.fleetset, "admin", "login", "--sso", "--server", self.options.server],
                                 env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        prompt = login.stderr.readline()
        print(f"cli: {prompt.strip()}", flush=True)
        found = re.search(r"open (\S+) in a browser and enter the code (\S+)", prompt)
        check(found is not None, f"the CLI should say where to go and the code: {prompt!r}")
        address, code = found.group(1), found.group(2)
        driver = self.fresh_browser()
        driver.get(address)
        self.provider_login(driver, "alice", "alice-pw")
        wait_until("the provider's device page", lambda: driver.find_elements(By.NAME, "user_code"))
        field = driver.find_element(By.NAME, "user_code")
        if not field.get_attribute("value"):
            field.send_keys(code)
        driver.find_element(By.CSS_SELECTOR, "form [type=submit]").click()
        wait_until("the approval page", lambda: "/device-confirm/" in driver.current_url)
        driver.find_element(By.CSS_SELECTOR, "[name=action][value=accept]").click()
        wait_until("the approval", lambda: "/device-grant-status/" in driver.current_url)
        out, err = login.communicate(timeout=60)
        print(f"cli: {out.strip()} {err.strip()}", flush=True)
        check(login.returncode == 0, f"fleetset admin login --sso failed: {err}")
        check("signed in to" in out and "as alice" in out, f"the CLI says who signed in: {out}")
        devices = subprocess.run([self.options.fleetset, "admin", "devices"], env=environment, capture_output=True, text=True)
        check(devices.returncode == 0, f"fleetset admin devices with the token: {devices.stderr}")
        print(f"devices-output {devices.stdout.strip()!r}", flush=True)
        print(f"cli-config {self.config}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--provider-dir", required=True)
    parser.add_argument("--rotate", required=True, help="the provider's rotate-key.sh")
    parser.add_argument("--fleetset", required=True, help="the fleetset CLI")
    add_browser_arguments(parser)
    options = parser.parse_args()
    os.makedirs(options.screenshots, exist_ok=True)
    run = SingleSignOn(options)
    return report(run, options, run.drivers, "ALL OK")


if __name__ == "__main__":
    sys.exit(main())
