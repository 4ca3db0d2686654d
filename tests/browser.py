"""Headless Chromium for the browser tests (the explorer's page, the notebook views, the deck
notebooks' exported pages): Debian's chromium and chromedriver (``make browser``) through
selenium. Every name resolves nowhere but 127.0.0.1, so a page that reaches for the network is
seen in the DevTools log (:func:`requested_urls`), not answered."""

from __future__ import annotations

import json
import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
FLAGS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
         "--window-size=1280,1100", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def chromium(*, offline: bool = False, logs: tuple[str, ...] = ("performance",)):
    """A headless Chromium driver whose ``logs`` are kept; ``offline``: its network emulated off."""
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {log: "ALL" for log in logs})
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    if offline:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    return driver


def requested_urls(driver) -> list[str]:
    """Every URL the page asked for since the last call (the DevTools log: failed requests too)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls
