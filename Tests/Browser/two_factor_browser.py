#!/usr/bin/env python3
"""Two-factor sign-in in a real browser, across two server instances on one PostgreSQL
(TwoFactorBrowserTests in Tests/FleetsetCLITests starts them and runs this).

A person signs in on instance A with a password, sets up two-factor sign-in (the QR code the
server draws is read back with zbarimg and must carry the secret the page shows), confirms it
with a code computed by pyotp, and gets recovery codes. Then, signed out and in again: a wrong
code is refused, pyotp's code is taken. The session is carried to a second browser on
instance B, which accepts it; signing out in the first browser ends it on B at once.

Every step asserts what a person would see; any failure ends the run with exit status 1 and
says which step and why. Each page is checked with axe-core.
"""
import argparse
import os
import subprocess
import sys
import time

import pyotp
from selenium.webdriver.common.by import By

from console_browser import Console, add_browser_arguments, check, check_page, report, run_steps, wait_until


class TwoFactor:
    def __init__(self, options):
        self.options = options
        self.results = {}
        # The browser set-up (headless chromium through chromium-driver) is the console test's.
        self.first = Console.browser(self, javascript=True)
        self.second = Console.browser(self, javascript=True)
        self.secret = None

    def page(self, name, driver):
        check_page(driver, name, self.options.screenshots, self.results)

    def text(self, driver):
        return driver.find_element(By.CSS_SELECTOR, "main").text

    def cookie(self, driver):
        return next((c for c in driver.get_cookies() if c["name"] == "fleetset_console"), None)

    def sign_in(self, driver, base, password):
        driver.get(base + "/console/sign-in")
        driver.find_element(By.CSS_SELECTOR, "#name").send_keys(self.options.name)
        driver.find_element(By.CSS_SELECTOR, "#password").send_keys(password)
        driver.find_element(By.CSS_SELECTOR, 'form.sign-in button[type="submit"]').click()

    def sign_out(self, driver):
        driver.find_element(By.CSS_SELECTOR, 'form.sign-out button[type="submit"]').click()
        wait_until("the sign-in page after signing out", lambda: driver.current_url.endswith("/console/sign-in"))

    # MARK: - The steps

    def run(self):
        steps = [self.password_sign_in, self.set_up_two_factor, self.code_sign_in, self.session_on_other_instance,
                 self.sign_out_ends_it_everywhere]
        run_steps(steps, self.first, self.options.screenshots)

    def password_sign_in(self):
        a = self.options.a
        self.sign_in(self.first, a, "not the password at all")
        wait_until("the refusal", lambda: "The name or the password is not right." in self.text(self.first))
        check(self.cookie(self.first) is None, "a wrong password must not get a session cookie")
        self.page("sign-in-refused", self.first)
        self.sign_in(self.first, a, self.options.password)
        wait_until("the apps page", lambda: self.first.current_url.endswith("/console/apps"))
        check(self.options.password not in self.first.page_source, "the password must not appear in a page")

    def set_up_two_factor(self):
        self.first.get(self.options.a + "/console/account")
        check("Two-factor sign-in is off" in self.text(self.first), "the account page should say two-factor sign-in is off")
        self.page("account", self.first)
        self.first.find_element(By.CSS_SELECTOR, 'form[action="/console/account/two-factor"] button').click()
        wait_until("the set-up page", lambda: self.first.find_elements(By.CSS_SELECTOR, "[data-secret]"))
        self.page("two-factor-setup", self.first)
        self.secret = self.first.find_element(By.CSS_SELECTOR, "[data-secret]").text.strip()
        # The QR code the server drew, read by an independent reader, carries that secret.
        picture = os.path.join(self.options.screenshots, "qr-code.png")
        self.first.find_element(By.CSS_SELECTOR, "figure.qr svg").screenshot(picture)
        read = subprocess.run(["zbarimg", "--quiet", "--raw", "--nodbus", picture], capture_output=True, text=True)
        check(read.returncode == 0, f"zbarimg could not read the QR code: {read.stderr}")
        uri = read.stdout.strip()
        check(uri.startswith(f"otpauth://totp/fleetset:{self.options.name}?") and f"secret={self.secret}" in uri,
              f"the QR code should carry the secret shown: {uri!r}")
        totp = pyotp.parse_uri(uri)
        self.first.find_element(By.CSS_SELECTOR, "#code").send_keys(totp.now())
        self.first.find_element(By.CSS_SELECTOR, 'form[action="/console/account/two-factor/confirm"] button').click()
        wait_until("the recovery codes", lambda: self.first.find_elements(By.CSS_SELECTOR, "[data-recovery-codes] li"))
        codes = [item.text for item in self.first.find_elements(By.CSS_SELECTOR, "[data-recovery-codes] li")]
        check(len(codes) == 10 and len(set(codes)) == 10, f"ten different recovery codes: {codes}")
        self.page("recovery-codes", self.first)
        self.first.get(self.options.a + "/console/account")
        check("Two-factor sign-in is on" in self.text(self.first), "the account page should say two-factor sign-in is on")
        self.sign_out(self.first)

    def code_sign_in(self):
        self.sign_in(self.first, self.options.a, self.options.password)
        wait_until("the code page", lambda: self.first.current_url.endswith("/console/sign-in/code"))
        self.page("sign-in-code", self.first)
        # Waiting for the code, the session opens nothing else.
        self.first.get(self.options.a + "/console/apps")
        wait_until("the sign-in page", lambda: "/console/sign-in" in self.first.current_url)
        self.first.get(self.options.a + "/console/sign-in/code")
        totp = pyotp.TOTP(self.secret)
        # A code of none of the steps the server accepts now (this one, the one before, the one after).
        now = time.time()
        accepted = {totp.at(now + offset) for offset in (-60, -30, 0, 30, 60)}
        wrong = next(code for code in (f"{n:06d}" for n in range(1000000)) if code not in accepted)
        self.first.find_element(By.CSS_SELECTOR, "#code").send_keys(wrong)
        self.first.find_element(By.CSS_SELECTOR, 'form.sign-in button[type="submit"]').click()
        wait_until("the wrong code's refusal", lambda: "that code is not right" in self.text(self.first))
        check(not self.first.current_url.endswith("/console/apps"), "a wrong code must not sign in")
        # The code used to confirm is spent: the next step's code (the server takes one step of drift).
        self.first.find_element(By.CSS_SELECTOR, "#code").send_keys(totp.at(time.time() + 30))
        self.first.find_element(By.CSS_SELECTOR, 'form.sign-in button[type="submit"]').click()
        wait_until("the apps page", lambda: self.first.current_url.endswith("/console/apps"))

    def session_on_other_instance(self):
        cookie = self.cookie(self.first)
        check(cookie is not None, "no session cookie after the code")
        # For the test to look for in the servers' logs (where it must not be).
        print(f"session-cookie {cookie['value']}", flush=True)
        # The second browser holds the same session on instance B, as a balancer would send it there.
        self.second.get(self.options.b + "/console/sign-in")
        self.second.add_cookie({"name": cookie["name"], "value": cookie["value"], "path": "/console"})
        self.second.get(self.options.b + "/console/apps")
        wait_until("instance B's apps page", lambda: self.second.current_url.endswith("/console/apps")
                   and "Apps" in self.second.title)
        self.second.get(self.options.b + "/console/account")
        check(self.options.name in self.text(self.second), "instance B should know who is signed in")

    def sign_out_ends_it_everywhere(self):
        self.sign_out(self.first)
        self.second.get(self.options.b + "/console/apps")
        wait_until("instance B to refuse the ended session",
                   lambda: self.second.current_url.endswith("/console/sign-in"))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--a", required=True, help="instance A's base URL")
    parser.add_argument("--b", required=True, help="instance B's base URL")
    parser.add_argument("--name", required=True)
    parser.add_argument("--password", required=True)
    add_browser_arguments(parser)
    options = parser.parse_args()
    os.makedirs(options.screenshots, exist_ok=True)
    run = TwoFactor(options)
    return report(run, options, [run.first, run.second], "ALL OK")


if __name__ == "__main__":
    sys.exit(main())
