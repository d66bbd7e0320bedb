#!/usr/bin/env python3
"""The admin console in a real browser: Debian's chromium, driven by selenium through
chromium-driver, against a real fleetset-server with a real fleetsetd applying what the
browser changes (ConsoleBrowserTests in Tests/FleetAgentTests starts both and runs this).

Every step asserts what a person would see; any failure ends the run with exit status 1 and
says which step and why. Each page is checked with axe-core (bundled by axe-selenium-python):
no serious or critical violation is allowed. Screenshots of every page go to --screenshots,
the axe results to --results (JSON).
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from axe_selenium_python import Axe
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)


def sign_in_with_token(driver, token):
    """Signs in on the sign-in page shown with the admin token (the folded-away form)."""
    details = driver.find_element(By.CSS_SELECTOR, "details.admin-token")
    if not details.get_attribute("open"):
        details.find_element(By.CSS_SELECTOR, "summary").click()
    field = driver.find_element(By.CSS_SELECTOR, "#token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, 'form.token-sign-in button[type="submit"]').click()


def check_page(driver, name, screenshots, results, width=1280):
    """A screenshot of the whole page shown, `width` pixels wide (1280: a laptop, 820: a
    tablet), and its accessibility check: no serious or critical axe-core violation."""
    driver.set_window_size(width, 1000)
    height = driver.execute_script("return document.documentElement.scrollHeight;")
    driver.set_window_size(width, min(max(height + 140, 700), 6000))
    driver.save_screenshot(os.path.join(screenshots, f"{name}.png"))
    axe = Axe(driver)
    axe.inject()
    result = axe.run(options={"resultTypes": ["violations"]})
    driver.set_window_size(1280, 1000)
    serious = [v for v in result["violations"] if v.get("impact") in ("serious", "critical")]
    results[name] = {
        "url": driver.current_url,
        "width": width,
        "violations": [{"id": v["id"], "impact": v.get("impact"), "nodes": len(v["nodes"])} for v in result["violations"]],
        "seriousOrCritical": len(serious),
    }
    check(not serious, f"axe found serious or critical violations on {name}: " +
          "; ".join(f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}" for v in serious))


def run_steps(steps, driver, screenshots):
    """Runs each step, saying how long it took; the first failure ends the run with a
    screenshot of where `driver` was, naming the step and why."""
    for step in steps:
        started = time.monotonic()
        try:
            step()
        except Exception as failure:
            driver.save_screenshot(os.path.join(screenshots, f"failed-{step.__name__}.png"))
            raise Failed(f"{step.__name__}: {type(failure).__name__}: {failure}")
        print(f"ok {step.__name__} ({time.monotonic() - started:.1f} s)", flush=True)


def add_browser_arguments(parser):
    """The arguments every browser script takes: where screenshots and axe results go, and the browser."""
    parser.add_argument("--screenshots", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")


def report(run, options, drivers, passed):
    """Runs `run.run()`; prints `passed` or FAILED and why; always writes the axe results and
    closes the browsers. Returns the exit status."""
    try:
        run.run()
    except Failed as failure:
        print(f"FAILED {failure}", flush=True)
        return 1
    finally:
        with open(options.results, "w") as file:
            json.dump(run.results, file, indent=2)
        for driver in drivers:
            driver.quit()
    print(passed, flush=True)
    return 0


def wait_until(what, predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as error:  # the page may be between two states
            last = error
        time.sleep(0.1)
    raise Failed(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class Console:
    def __init__(self, options):
        self.options = options
        self.base = options.url.rstrip("/")
        self.token = open(options.admin_token_file).read().strip()
        self.results = {}
        self.driver = self.browser(javascript=True)

    def browser(self, javascript):
        chrome = webdriver.ChromeOptions()
        chrome.binary_location = self.options.chromium
        for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,1000", "--force-prefers-reduced-motion"]:
            chrome.add_argument(argument)
        if not javascript:
            chrome.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
        driver = webdriver.Chrome(service=Service(self.options.chromedriver), options=chrome)
        driver.set_page_load_timeout(30)
        return driver

    # MARK: - Helpers

    def open(self, path):
        self.driver.get(self.base + path)

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def finds(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def settings(self):
        """The device's settings.json, as the agent wrote it."""
        with open(self.options.settings_file) as file:
            return json.load(file)

    def wait_for_settings(self, what, predicate):
        return wait_until(f"the agent to write {what} to settings.json",
                          lambda: predicate(self.settings()["values"]), timeout=60)

    def page(self, name, width=1280, driver=None):
        check_page(driver or self.driver, name, self.options.screenshots, self.results, width)

    def cookie(self):
        return next((c for c in self.driver.get_cookies() if c["name"] == "fleetset_console"), None)

    def post(self, path, fields, cookie=None, headers=None):
        """A form post outside the browser (replays and forgeries): the status and the body."""
        data = urllib.parse.urlencode(fields).encode()
        request = urllib.request.Request(self.base + path, data=data, method="POST")
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
        if cookie:
            request.add_header("Cookie", f"fleetset_console={cookie}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(request, timeout=10) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def field(self, pointer):
        return self.find(f'.field[data-pointer="{pointer}"]')

    def save(self):
        # The page the form is on: a second save on a page already showing "saved=1" must wait
        # for the new page, not take the old one's notice (a race a loaded machine shows).
        self.before_save = self.find("main")
        self.find('form[data-settings-form] button[type="submit"]').click()

    def wait_saved(self):
        before = getattr(self, "before_save", None)
        if before is not None:
            wait_until("the page after the save", lambda: self.is_stale(before))
        wait_until("the saved notice", lambda: "saved=1" in self.driver.current_url
                   and "Saved." in self.find("main").text)

    @staticmethod
    def is_stale(element):
        try:
            element.is_enabled()
            return False
        except StaleElementReferenceException:
            return True

    # MARK: - The steps

    def run(self):
        steps = [self.sign_in, self.apps, self.change_setting, self.invalid_value, self.add_list_item,
                 self.reset_device_value, self.live_rollup, self.devices, self.metadata_preview, self.tokens,
                 self.rollout, self.without_javascript, self.sign_out_and_replay]
        run_steps(steps, self.driver, self.options.screenshots)

    def sign_in(self):
        self.open("/console/apps")
        wait_until("the sign-in page", lambda: "/console/sign-in" in self.driver.current_url)
        self.page("sign-in")
        sign_in_with_token(self.driver, "fsa_not-the-token")
        wait_until("the refusal", lambda: "That is not the admin token." in self.find("main").text)
        check(self.cookie() is None, "a wrong token must not get a session cookie")
        sign_in_with_token(self.driver, self.token)
        wait_until("the apps page", lambda: self.driver.current_url.endswith("/console/apps"))
        cookie = self.cookie()
        check(cookie is not None, "no session cookie after signing in")
        check(cookie["httpOnly"], f"the session cookie must be HttpOnly: {cookie}")
        check(cookie.get("sameSite") == "Strict", f"the session cookie must be SameSite=Strict: {cookie}")
        check("expiry" in cookie, f"the session cookie must expire: {cookie}")
        check(self.token not in self.driver.page_source, "the admin token must not appear in a page")

    def apps(self):
        self.open("/console/apps")
        row = self.find('tr[data-app="kiosk"]')
        check(row.find_element(By.CSS_SELECTOR, "[data-devices]").text == "1", "kiosk should have 1 device")
        wait_until("the device's applied report", lambda: self.rollup("applied") == "1", timeout=30)
        self.page("apps")

    def rollup(self, state):
        return self.find(f'tr[data-app="kiosk"] [data-state="{state}"]').text

    def change_setting(self):
        self.open("/console/apps/kiosk")
        self.page("settings")
        self.page("settings-tablet", width=820)
        greeting = self.find(".field[data-pointer=\"/greeting\"] input")
        greeting.clear()
        greeting.send_keys("Hello from the browser")
        Select(self.find(".field[data-pointer=\"/idleMinutes\"] select")).select_by_visible_text("5 minutes")
        self.save()
        self.wait_saved()
        self.wait_for_settings("the new greeting and idle time",
                               lambda v: v.get("greeting") == "Hello from the browser" and v.get("idleMinutes") == "5")
        check("set at app" in self.field("/greeting").text, "the greeting should now show it is set at the app scope")
        check(self.settings()["values"].get("volume") == 5, "untouched settings must stay as they were")
        # A secret is write-only: it reaches the device, and no page ever shows it.
        secret = self.find('.field[data-pointer="/operatorPassword"] input[type="password"]')
        check(secret.get_attribute("value") == "", "a secret field starts empty")
        secret.send_keys("4711-browser")
        self.save()
        self.wait_saved()
        self.wait_for_settings("the operator password", lambda v: v.get("operatorPassword") == "4711-browser")
        check("4711-browser" not in self.driver.page_source, "the page must never show a secret")
        check(self.find('.field[data-pointer="/operatorPassword"] .badge.secret').text == "set", "the secret shows as set")

    def invalid_value(self):
        before = self.settings()
        media = self.find(".field[data-pointer=\"/mediaUrl\"] input")
        media.clear()
        media.send_keys("ftp://media.example/feed")
        self.save()
        error = wait_until("the message next to the media URL",
                           lambda: self.find('.field[data-pointer="/mediaUrl"] .field-error').is_displayed()
                           and self.find('.field[data-pointer="/mediaUrl"] .field-error'))
        check("https://" in error.text or "pattern" in error.text,
              f"the message should say what is wrong: {error.text!r}")
        check(media.get_attribute("aria-invalid") == "true", "the field should be marked invalid")
        check(self.find(".error-summary").is_displayed(), "the error summary should be shown")
        others = [e for e in self.finds(".field-error") if e.is_displayed()]
        check(len(others) == 1, f"only the media URL should have a message, not {[e.text for e in others]}")
        self.page("settings-error")
        time.sleep(1)
        check(self.settings() == before, "a refused change must not reach the device")

    def add_list_item(self):
        self.open("/console/apps/kiosk")
        before = len(self.settings()["values"]["playlist"])
        self.find('fieldset[data-list="/playlist"] button.add-item').click()
        rows = self.finds('fieldset[data-list="/playlist"] li.list-item')
        check(len(rows) == before + 1, f"Add item should add a row ({len(rows)} rows)")
        new = rows[-1]
        url = new.find_element(By.CSS_SELECTOR, 'input[type="text"]')
        check(self.driver.switch_to.active_element == url, "the new item's first field should have the focus")
        url.send_keys("https://media.example/added.png")
        Select(new.find_element(By.CSS_SELECTOR, "select")).select_by_visible_text("30 seconds")
        # Move it to the top, with the keyboard-reachable button.
        new.find_element(By.CSS_SELECTOR, 'button[data-row-action="up"]').click()
        self.save()
        self.wait_saved()
        playlist = self.wait_for_settings("the added playlist item",
                                          lambda v: len(v.get("playlist", [])) == before + 1 and v["playlist"])
        check(playlist[0] == {"url": "https://media.example/added.png", "seconds": "30"},
              f"the new item should be first, as moved: {playlist}")
        self.page("settings-list")

    def reset_device_value(self):
        device = self.options.device
        self.open(f"/console/apps/kiosk?scope=device:{device}")
        greeting = self.find(".field[data-pointer=\"/greeting\"] input")
        check("Inherited from the app scope" in self.field("/greeting").text,
              f"at device scope the greeting should be inherited from the app: {self.field('/greeting').text!r}")
        greeting.clear()
        greeting.send_keys("Only on this kiosk")
        self.save()
        self.wait_saved()
        self.wait_for_settings("the device's own greeting", lambda v: v.get("greeting") == "Only on this kiosk")
        field = self.field("/greeting")
        check(f"set at device:{device}" in field.text, f"the greeting should show it is set at the device: {field.text!r}")
        self.page("settings-device")
        field.find_element(By.CSS_SELECTOR, 'input[name="reset:/greeting"]').click()
        self.save()
        self.wait_saved()
        self.wait_for_settings("the inherited greeting again", lambda v: v.get("greeting") == "Hello from the browser")
        check("Inherited from the app scope" in self.field("/greeting").text, "after the reset the greeting is inherited again")

    def live_rollup(self):
        self.open("/console/apps")
        wait_until("the applied report of the newest revision", lambda: self.rollup("applied") == "1")
        self.driver.execute_script("window.fleetsetMarker = 'same page';")
        revision = self.settings()["revision"]
        answer = subprocess.run(
            [self.options.cli, "ack", "--app", "kiosk", "--revision", str(revision), "--state", "error",
             "--message", "the browser test says no", "--config", self.options.agent_config],
            capture_output=True, text=True, timeout=30)
        check(answer.returncode == 0, f"fleetset ack failed: {answer.stderr}")
        wait_until("the roll-up to show the error without a reload", lambda: self.rollup("error") == "1", timeout=30)
        check(self.rollup("applied") == "0", "the device's applied count should move to error")
        check(self.driver.execute_script("return window.fleetsetMarker;") == "same page",
              "the page should update in place, not reload")
        self.page("apps-live")

    def metadata_preview(self):
        self.open("/console/apps/kiosk/metadata")
        document = json.loads(self.find("#metadata-document").get_property("value"))
        document["version"] = 2
        document["schema"]["properties"]["volume"]["maximum"] = 3
        document["schema"]["properties"]["volume"]["default"] = 3
        document["schema"]["properties"]["brightness"] = {"type": "integer", "title": "Brightness", "default": 80}
        # A stored value the new version refuses: volume 9 at the app scope.
        self.open("/console/apps/kiosk")
        volume = self.find('.field[data-pointer="/volume"] input')
        volume.clear()
        volume.send_keys("9")
        self.save()
        self.wait_saved()
        self.open("/console/apps/kiosk/metadata")
        area = self.find("#metadata-document")
        self.driver.execute_script("arguments[0].value = arguments[1];", area, json.dumps(document, indent=2))
        self.find('form.metadata-upload button[value="preview"]').click()
        wait_until("the preview", lambda: self.find(".review"))
        review = self.find(".review").text
        check("adds brightness" in review, f"the preview should list the added setting: {review!r}")
        check("changes volume" in review, f"the preview should list the changed setting: {review!r}")
        breaks = self.find("table.breaks").text
        check("/volume" in breaks and self.options.device in breaks,
              f"the preview should name the value and device that break: {breaks!r}")
        check(self.find('form.metadata-store button').text == "Store anyway (force)", "storing must say it forces")
        self.page("metadata-preview")
        self.open("/console/apps/kiosk/metadata")
        check("Stored version: 1." in self.find("main").text, "a preview must not store the new version")

    def devices(self):
        self.open("/console/devices")
        row = self.find(f'tr[data-device="{self.options.device}"]')
        check("kiosk" in row.text, f"the device row should list its app: {row.text!r}")
        self.page("devices")
        Select(self.find("#filter-state")).select_by_value("applied")
        self.find('form.filters button[type="submit"]').click()
        wait_until("the filtered list", lambda: "state=applied" in self.driver.current_url)
        check(not self.finds(f'tr[data-device="{self.options.device}"]'),
              "the device reported error, so the applied filter must hide it")
        self.open(f"/console/devices/{self.options.device}")
        text = self.find("main").text
        check("the browser test says no" in text, f"the device page should show its latest report: {text[:400]!r}")
        check("Hello from the browser" in text, "the device page should explain its values")
        check("operatorPassword" in text, "the explanation lists every setting, secrets masked")
        reports = self.find("table.reports").text
        check("the browser test says no" in reports and "applied" in reports and "agent" in reports and "app" in reports,
              f"the recent reports should show the agent's and the app's reports: {reports!r}")
        check(len(self.finds("table.reports tbody tr")) >= 3, "several recent reports are listed")
        self.page("device")

    def rollout(self):
        # A change staged through the admin API; the device's app says no, so the rollout pauses.
        staged = "https://media.example.com/from-the-browser-test"
        request = urllib.request.Request(
            self.base + "/v1/admin/apps/kiosk/rollouts", method="POST",
            data=json.dumps({"scope": "app", "patch": {"mediaUrl": staged}, "waves": ["100%"],
                             "message": "staged by the browser test"}).encode())
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as answer:
            check(answer.status == 201, f"the rollout should start: {answer.status}")
        self.wait_for_settings("the staged media", lambda v: v.get("mediaUrl") == staged)
        revision = self.settings()["revision"]
        self.open("/console/apps/kiosk/history")
        answer = subprocess.run(
            [self.options.cli, "ack", "--app", "kiosk", "--revision", str(revision), "--state", "error",
             "--message", "the player cannot show the browser test's media", "--config", self.options.agent_config],
            capture_output=True, text=True, timeout=30)
        check(answer.returncode == 0, f"fleetset ack failed: {answer.stderr}")
        wait_until("the rollout to pause, shown without a reload",
                   lambda: self.find("section.rollout").get_attribute("data-phase") == "paused", timeout=30)
        box = self.find("section.rollout").text
        check("the player cannot show the browser test's media" in box and self.options.device in box,
              f"the paused rollout should name the device and what its app said: {box!r}")
        history = self.find("table.history").text
        check("staged by the browser test" in history and "rollout" in history, f"the history should list the rollout: {history!r}")
        check("********" in history or "operatorPassword" not in history, "secrets are masked in the history")
        self.page("history")
        self.find('form[action$="/rollout/abort"] button').click()
        wait_until("the aborted rollout", lambda: "The rollout is aborted." in self.find("main").text)
        check(self.find("section.rollout").get_attribute("data-phase") == "aborted", "the rollout should be aborted")
        self.wait_for_settings("the media before the rollout", lambda v: v.get("mediaUrl") != staged)
        self.open("/console/apps")
        check(not self.finds('tr[data-rollout-app="kiosk"]'), "the Apps page shows no rollout once it ended")

    def tokens(self):
        self.open("/console/tokens")
        self.find('input[name="apps"][value="kiosk"]').click()
        self.find("#token-groups").send_keys("lobby")
        self.find('form.make-token button[type="submit"]').click()
        token = wait_until("the new token", lambda: self.find("#new-token").get_property("value"))
        check(token.startswith("fse_"), f"an enrollment token starts with fse_: {token[:4]}")
        self.page("tokens")
        self.open("/console/tokens")
        check(token not in self.driver.page_source, "the token is shown once only")
        rows = self.finds("tr[data-token]")
        check(len(rows) >= 1, "the new token should be listed")
        rows[-1].find_element(By.CSS_SELECTOR, "button.danger").click()
        wait_until("the revocation notice", lambda: "is revoked" in self.find("main").text)

    def without_javascript(self):
        """The basic forms work in a browser with JavaScript off: the server draws the errors."""
        driver = self.browser(javascript=False)
        try:
            driver.get(self.base + "/console/sign-in")
            sign_in_with_token(driver, self.token)
            wait_until("the apps page without JavaScript", lambda: driver.current_url.endswith("/console/apps"))
            driver.get(self.base + "/console/apps/kiosk")
            check(not driver.find_elements(By.CSS_SELECTOR, "button.add-item"), "without JavaScript there is no script-made button")
            volume = driver.find_element(By.CSS_SELECTOR, '.field[data-pointer="/volume"] input')
            volume.clear()
            volume.send_keys("2")
            media = driver.find_element(By.CSS_SELECTOR, '.field[data-pointer="/mediaUrl"] input')
            media.clear()
            media.send_keys("http://plain.example/feed")
            driver.find_element(By.CSS_SELECTOR, 'form[data-settings-form] button[type="submit"]').click()
            wait_until("the answer to the form (drawn at the form's address)", lambda: "/settings?scope=app" in driver.current_url)
            error = driver.find_element(By.CSS_SELECTOR, '.field[data-pointer="/mediaUrl"] .field-error')
            check(error.is_displayed() and "https://" in error.text, f"the message should be shown by the field: {error.text!r}")
            check(driver.find_element(By.CSS_SELECTOR, '.field[data-pointer="/mediaUrl"] input').get_property("value")
                  == "http://plain.example/feed", "the refused value is shown again as typed")
            # A screenshot only: axe runs as a script, which this browser does not run (the same
            # page with scripts on was checked above).
            driver.set_window_size(1280, min(driver.execute_script("return document.documentElement.scrollHeight;") + 140, 6000))
            driver.save_screenshot(os.path.join(self.options.screenshots, "settings-error-no-script.png"))
            check(self.settings()["values"]["volume"] != 2, "a refused form changes nothing, not even its valid fields")
            media = driver.find_element(By.CSS_SELECTOR, '.field[data-pointer="/mediaUrl"] input')
            media.clear()
            media.send_keys("https://plain.example/feed")
            before = len(self.settings()["values"]["playlist"])
            new_row = driver.find_element(By.CSS_SELECTOR, 'fieldset[data-list="/playlist"] label.add input')
            new_row.click()
            new_item = new_row.find_element(By.XPATH, "ancestor::li")
            new_item.find_element(By.CSS_SELECTOR, 'input[type="text"]').send_keys("https://plain.example/no-script.png")
            driver.find_element(By.CSS_SELECTOR, 'form[data-settings-form] button[type="submit"]').click()
            wait_until("the saved page", lambda: "saved=1" in driver.current_url)
            values = self.wait_for_settings("the form sent without JavaScript",
                                            lambda v: v.get("volume") == 2 and len(v["playlist"]) == before + 1 and v)
            check(values["playlist"][-1]["url"] == "https://plain.example/no-script.png", f"the added item: {values['playlist']}")
            check(values["mediaUrl"] == "https://plain.example/feed", "the corrected value is saved")
        finally:
            driver.quit()

    def sign_out_and_replay(self):
        self.open("/console/apps/kiosk")
        csrf = self.find('form[data-settings-form] input[name="csrf"]').get_property("value")
        session = self.cookie()["value"]
        forged = {"csrf": "not-the-token", "v:/greeting": "forged"}
        status, _ = self.post("/console/apps/kiosk/settings?scope=app", forged, cookie=session)
        check(status == 403, f"a form without the session's CSRF token must be refused with 403, not {status}")
        status, _ = self.post("/console/apps/kiosk/settings?scope=app", {"csrf": csrf, "v:/greeting": "forged"},
                              cookie=session, headers={"Origin": "https://evil.example"})
        check(status == 403, f"a form from another origin must be refused with 403, not {status}")
        self.find('form.sign-out button[type="submit"]').click()
        wait_until("the sign-in page", lambda: "/console/sign-in" in self.driver.current_url)
        check(self.cookie() is None, "signing out must remove the session cookie")
        self.open("/console/apps")
        wait_until("a redirect to sign in", lambda: "/console/sign-in" in self.driver.current_url)
        # The replay: the whole request as the browser sent it before signing out.
        status, _ = self.post("/console/apps/kiosk/settings?scope=app", {"csrf": csrf, "v:/greeting": "replayed"},
                              cookie=session)
        check(status == 403, f"a replayed form after sign-out must be refused with 403, not {status}")
        time.sleep(1)
        check(self.settings()["values"]["greeting"] == "Hello from the browser", "no forged or replayed change may land")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--admin-token-file", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--settings-file", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--agent-config", required=True)
    add_browser_arguments(parser)
    options = parser.parse_args()
    os.makedirs(options.screenshots, exist_ok=True)
    console = Console(options)
    return report(console, options, [console.driver], "all console steps passed")


if __name__ == "__main__":
    sys.exit(main())
