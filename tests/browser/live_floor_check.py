"""Two more scenarios of the page, in real headless Chromium (the helpers of page_check.py):

    python tests/browser/live_floor_check.py BASE_URL OUT_DIR ARCHIVE BIN CSV

live:  switches live on for the track ["run_1", "probe.03"], then runs `BIN ingest ARCHIVE
       ... CSV` (a writer in another process appending that track's newer rows, a barrier
       every 200) and waits for the page to draw a view
       whose right edge is the track's new newest axis + 1, as /api/streams answers it after
       the writer's last barrier; checks that draw against the API as page_check does.
floor: picks ["run_0", "probe.00"], which the caller retired whole, and checks the page
       learned the floor from the 416 and drew a boundary, not an error.

Prints `LIVE_FLOOR: ok: ...` and exits 0, or exits 1 naming the failed check.
"""

import json
import os
import subprocess
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from page_check import (  # noqa: E402
    TIMEOUT,
    check,
    check_draw,
    fetch_json,
    find_node,
    run_in_browser,
    view,
    wait_for_draw,
)


def pick(driver, path):
    from selenium.webdriver.common.by import By

    for depth in range(1, len(path)):
        if find_node(driver, path) is None:
            node = find_node(driver, path[:depth])
            check(node is not None, f"the tree has no node {path[:depth]}")
            node.find_element(By.CSS_SELECTOR, ".caret").click()
    node = find_node(driver, path)
    check(node is not None, f"the tree has no node {path}")
    node.click()


def last_axis(base, path):
    streams = fetch_json(base + "/api/streams", "")
    nodes = streams["streams"][0]["tree"]
    for depth, label in enumerate(path):
        node = next(n for n in nodes if n["label"] == label)
        nodes = node["children"]
    return node["last_axis"]


def main():
    base, out_dir, archive, binary, csv = sys.argv[1].rstrip("/"), *sys.argv[2:6]
    os.makedirs(out_dir, exist_ok=True)
    summary = {"draws": 0, "checked": []}
    return run_in_browser(
        "live/floor check",
        lambda driver: drive(driver, base, out_dir, archive, binary, csv, summary),
        os.path.join(out_dir, "live-floor-failed.png"),
    )


def drive(driver, base, out_dir, archive, binary, csv, summary):
    driver.get(base + "/")
    # The initial view (every track) holds the retired one: it answers a floor too.
    summary["draws"] = wait_for_draw(driver, 0, "the initial view")["draws"]

    # The floor: a track retired whole answers 416; the page draws the boundary.
    retired = ["run_0", "probe.00"]
    pick(driver, retired)
    v = wait_for_draw(driver, summary["draws"], "the retired track")
    summary["draws"] = v["draws"]
    floor = driver.execute_script("return window.seriesView.floor")
    check(floor is not None, f"the page drew no floor for a retired track: {json.dumps(v)[:300]}")
    check(v.get("error") in (None, ""), f"the page shows an error, not a floor: {v.get('error')}")
    status = driver.find_element("id", "status").text
    check("floor" in status, f"the status line does not name the floor: {status!r}")
    driver.save_screenshot(os.path.join(out_dir, "floor.png"))

    # Live: a writer in another process appends; the view follows its barriers.
    track = ["run_1", "probe.03"]
    pick(driver, track)
    check_draw(driver, base, "", "the live track", summary, track=track)
    before = last_axis(base, track)
    driver.find_element("id", "live").click()
    check(driver.find_element("id", "live").is_selected(), "live did not switch on")
    writer = subprocess.run(
        [binary, "ingest", archive, "--stream", "capture", "--track", "run,probe", "--axis", "ordinal",
         "--seal-rows", "200", csv],
        capture_output=True, text=True)
    check(writer.returncode == 0, f"the writer failed: {writer.stderr[-2000:]}")
    after = last_axis(base, track)
    check(after > before, f"the writer did not move the track: {before} then {after}")
    # The view follows to the end: its survey asks to the end (no `to`: the page sends a
    # view edge at the newest axis as no bound, so rounding can never leave a row out),
    # and the newest bucket drawn ends at the writer's newest row.
    deadline = time.monotonic() + TIMEOUT
    newest = None
    while time.monotonic() < deadline:
        v = view(driver)
        if v and v["lastSurvey"] and not v["busy"] and v["drawn"]:
            q = urllib.parse.parse_qs(urllib.parse.urlparse(v["lastSurvey"]["url"]).query)
            newest = max(d["last"]["axis"] for d in v["drawn"])
            if newest == after and "to" not in q:
                break
        time.sleep(0.1)
    check(newest == after, f"live: the newest row drawn is at {newest}, the writer's newest is {after}")
    check("to" not in q, f"live: the view at the newest barrier asks up to {q.get('to')}, not to the end")
    summary["draws"] = 0  # any later draw
    check_draw(driver, base, "", "the live view", summary, track=track)
    driver.save_screenshot(os.path.join(out_dir, "live.png"))
    print(json.dumps({"ok": True, "floor": floor, "live_from": before, "live_to": after,
                      "checked": summary["checked"]}))
    print(f"LIVE_FLOOR: ok: floor at {floor} drawn; live followed {before} -> {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
