"""Nanosecond axes in the page, in real headless Chromium:

    python tests/browser/exact_check.py BASE_URL STREAM

Timestamps past 2^53 do not survive as JavaScript numbers. The page loads STREAM whole (its
initial view, the selection's whole extent) and the check asserts that its survey and its
statistics were asked for every row, exactly: the buckets' counts add up to the stream's
rows, and so do the answers of the mean and p95 folds the browser sent (Chromium's own
resource timing lists them, and the check asks them again itself). Then it zooms in once and
checks the draw against the API as page_check does. Prints `EXACT: ok: ...`.
"""

import json
import os
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_check import TIMEOUT, check, check_draw, fetch_json, run_in_browser  # noqa: E402


def main():
    base, stream = sys.argv[1].rstrip("/"), sys.argv[2]
    streams = fetch_json(base + "/api/streams", "")
    info = next(s for s in streams["streams"] if s["id"] == stream)
    rows = info["rows"]
    first = min(n["first_axis"] for n in info["tree"])
    check(first > 2**53, f"the stream's axis starts at {first}, not past 2^53: nothing to check")
    summary = {"draws": 0, "checked": []}
    return run_in_browser("exact check", lambda driver: drive(driver, base, stream, rows, summary))


def drive(driver, base, stream, rows, summary):
    driver.get(f"{base}/#stream={urllib.parse.quote(stream)}")
    check_draw(driver, base, "", "the whole stream", summary)
    s = driver.execute_script("return window.seriesView.lastSurvey.response")
    per_field = {}
    for b in s["buckets"]:
        per_field[b["field"]] = per_field.get(b["field"], 0) + b["count"]
    check(set(per_field.values()) == {rows}, f"the whole view's buckets hold {per_field} rows of {rows}")
    deadline = time.monotonic() + TIMEOUT
    folds = []
    while time.monotonic() < deadline and len(folds) < 2:
        folds = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name).filter(u => u.includes('/api/fold'));")
        time.sleep(0.1)
    check(len(folds) >= 2, f"the page asked for {len(folds)} folds")
    for url in folds[:2]:
        answer = fetch_json(url, "")
        counts = {a["count"] for a in answer["answers"]}
        check(counts == {rows}, f"{url} answers {counts} rows of {rows}: the page's range left rows out")
    driver.find_element("id", "zoom-in").click()
    check_draw(driver, base, "", "zoom-in", summary)
    print(f"EXACT: ok: the whole view's survey and folds hold all {rows} rows; the zoom drew what the API answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
