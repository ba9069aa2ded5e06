"""static/js/status.js, run by Node against a stub DOM (no browser on the CI box)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

SCRIPT = Path(settings.BASE_DIR) / "static" / "js" / "status.js"

HARNESS = """
const fs = require("fs");
const replies = %(replies)s;
const log = {fetched: [], reloaded: false, badge: []};
const badge = {
  dataset: %(dataset)s,
  set textContent(v) { log.badge.push(v); },
  className: "",
};
const timers = [];
global.document = {getElementById: (id) => (id === "live-status" ? badge : null)};
global.window = {
  setTimeout: (fn, ms) => timers.push(fn),
  location: {reload: () => { log.reloaded = true; }},
};
global.fetch = (url) => {
  log.fetched.push(url);
  const body = replies.shift();
  return Promise.resolve({ok: true, status: 200, json: () => Promise.resolve(body)});
};
eval(fs.readFileSync(%(script)s, "utf8"));
(async () => {
  for (let i = 0; i < 10 && timers.length; i++) {
    timers.shift()();
    await new Promise((r) => setImmediate(r));
  }
  console.log(JSON.stringify(log));
})();
"""


def run_status_js(replies, dataset):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    code = HARNESS % {
        "replies": json.dumps(replies),
        "dataset": json.dumps(dataset),
        "script": json.dumps(str(SCRIPT)),
    }
    out = subprocess.run([node, "-e", code], capture_output=True, text=True, timeout=30, check=True)
    return json.loads(out.stdout)


def test_polls_the_api_until_finished_then_reloads():
    replies = [
        {"evaluation": {"status": "queued"}},
        {"evaluation": {"status": "running"}},
        {"evaluation": {"status": "correct"}},
    ]
    log = run_status_js(replies, {"statusUrl": "/api/submissions/7/"})
    assert log["fetched"] == ["/api/submissions/7/"] * 3
    assert log["badge"] == ["queued", "running"]
    assert log["reloaded"] is True


def test_does_nothing_without_a_status_url():
    log = run_status_js([], {})
    assert log == {"fetched": [], "reloaded": False, "badge": []}
