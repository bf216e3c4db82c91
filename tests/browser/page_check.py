"""Drives the page `series-archive serve` serves in real headless Chromium and checks that what
it draws is what the API answers.

    python tests/browser/page_check.py BASE_URL OUT_DIR [TRACK_PATH_JSON]

BASE_URL is the server's root (http://127.0.0.1:PORT). TRACK_PATH_JSON names the tree node to
click (e.g. '["run_1"]'); without it, the first root node's first child. With
SERIES_ARCHIVE_TOKEN set, the page is opened with #token= and the check's own requests carry it.

For every draw (the track click, then two zoom-ins) the check fetches the page's last survey URL
itself and asserts the drawn buckets equal the API's, field for field and in number, that no
survey the browser sent asked for more than 4 x fields x plot width points, that the canvas shows
the min/max band, and saves OUT_DIR/page.png. It prints one JSON summary line and exits non-zero
on the first failed assertion. It never skips: no Chromium or chromedriver is a failure.
"""

import json
import math
import os
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
TIMEOUT = 30.0


class CheckFailed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise CheckFailed(message)


def fetch_json(url, token):
    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return json.loads(res.read())
    except urllib.error.HTTPError as e:
        raise CheckFailed(f"GET {url} answered {e.code}: {e.read()[:500]!r}") from None


def start_browser():
    for path in (CHROMIUM, CHROMEDRIVER):
        check(
            os.path.exists(path) and os.access(path, os.X_OK),
            f"{path} is missing: install Debian's chromium and chromium-driver "
            "(apt-get install -y chromium chromium-driver)",
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        raise CheckFailed(f"selenium is not installed ({e}): pip install -r requirements-test.txt") from None
    profile = tempfile.mkdtemp(prefix="page-check-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    except Exception as e:
        shutil.rmtree(profile, ignore_errors=True)
        raise CheckFailed(f"could not start headless Chromium through {CHROMEDRIVER}: {e}") from None
    driver.set_script_timeout(TIMEOUT)
    return driver, profile


def view(driver):
    return driver.execute_script(
        "const v = window.seriesView; if (!v) return null;"
        "return {busy: v.busy, draws: v.draws, error: v.error, lastSurvey: v.lastSurvey, drawn: v.drawn,"
        " zoomToDraw: v.zoomToDraw, background: v.background, plot: v.plot};"
    )


def wait_for_draw(driver, after, what):
    """Waits until the page finished a draw numbered above `after` and is idle."""
    deadline = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < deadline:
        last = view(driver)
        if last and last.get("error"):
            raise CheckFailed(f"{what}: the page shows an error: {last['error']}")
        if last and last["draws"] > after and not last["busy"]:
            return last
        time.sleep(0.05)
    raise CheckFailed(f"{what}: no draw within {TIMEOUT:.0f} s (seriesView: {json.dumps(last)[:400]})")


def same_point(drawn, api, name, i):
    for key in ("axis", "value"):
        a, b = drawn.get(key), api.get(key)
        if a is None or b is None:
            check(a is None and b is None, f"bucket {i}: {name}.{key} drawn {a!r}, API {b!r}")
            continue
        # The page holds JSON numbers as doubles, as Python's float() does.
        check(float(a) == float(b), f"bucket {i}: {name}.{key} drawn {a!r}, API {b!r}")


def check_draw(driver, base, token, what, summary, track=None):
    v = wait_for_draw(driver, summary["draws"], what)
    summary["draws"] = v["draws"]
    s = v["lastSurvey"]
    check(s is not None, f"{what}: seriesView.lastSurvey is empty after a draw")
    url = s["url"]
    check(url.startswith(base.rstrip("/") + "/api/survey?"), f"{what}: the survey URL {url} is not {base}/api/survey")
    q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    if track is not None:
        check(q.get("track", []) == track, f"{what}: the survey asked for track {q.get('track')}, the click chose {track}")
    budget, fields, width = int(q["budget"][0]), s["fields"], s["plotWidth"]
    check(budget == s["budget"], f"{what}: URL budget {budget} differs from seriesView budget {s['budget']}")
    check(fields >= 1 and width >= 1, f"{what}: fields {fields}, plot width {width}")
    check(budget <= 4 * fields * width, f"{what}: budget {budget} exceeds 4 x {fields} fields x {width} px")

    api = fetch_json(url, token)
    buckets = api["buckets"] if api.get("plan") else []
    drawn = v["drawn"]
    check(len(buckets) * 4 <= budget, f"{what}: the API answered {len(buckets)} buckets for a budget of {budget}")
    check(len(drawn) == len(buckets), f"{what}: drew {len(drawn)} buckets, the API answers {len(buckets)} for {url}")
    for i, (d, b) in enumerate(zip(drawn, buckets)):
        check(d["field"] == b["field"], f"{what}: bucket {i}: field drawn {d['field']}, API {b['field']}")
        for name in ("first", "last", "min", "max"):
            same_point(d[name], b[name], name, i)
        check(d["count"] == b["count"], f"{what}: bucket {i}: count drawn {d['count']}, API {b['count']}")
    check(len(buckets) > 0, f"{what}: the API answered no buckets for {url}; nothing to check the drawing against")

    # The band is on the canvas: sample inside a few of panel-0's band rectangles.
    band = [d for d in drawn if d["field"] == 0 and d["x1"] - d["x0"] >= 1 and d["yMin"] - d["yMax"] >= 3]
    check(band, f"{what}: no band of field 0 tall enough to sample")
    picks = [band[round(k * (len(band) - 1) / 4)] for k in range(5)] if len(band) > 5 else band
    points = []
    for d in picks:
        x = (d["x0"] + d["x1"] - 1) // 2
        for frac in (0.3, 0.5, 0.7):
            points.append([x, int(d["yMax"] + frac * (d["yMin"] - d["yMax"]))])
    pixels = driver.execute_script(
        "const c = document.getElementById('panel-0'); const g = c.getContext('2d');"
        "const r = c.width / c.getBoundingClientRect().width;"
        "return arguments[0].map(([x, y]) => Array.from(g.getImageData(Math.floor((x + 0.5) * r),"
        " Math.floor((y + 0.5) * r), 1, 1).data));",
        points,
    )
    bg = v["background"][:3]
    blank = [p for p, px in zip(points, pixels) if px[:3] == bg or px[3] == 0]
    check(
        not blank,
        f"{what}: panel-0 shows the background at {len(blank)} of {len(points)} points inside the band, e.g. {blank[:3]}",
    )
    summary["checked"].append(
        {"what": what, "buckets": len(buckets), "budget": budget, "plot_width": width, "fields": fields,
         "level": api["plan"]["level"], "cell_width": api["plan"]["cell_width"],
         "from": q.get("from", [None])[0], "to": q.get("to", [None])[0]}
    )
    summary["budget_limit"] = 4 * fields * width
    return v



def run_in_browser(name, body, shot=None):
    """Starts headless Chromium and answers `body(driver)`. A failed check, or selenium or the
    network failing, is a failure (exit status 1, never a skip), with a screenshot at `shot`;
    the browser is closed whatever happens."""
    driver = profile = None
    try:
        driver, profile = start_browser()
        return body(driver)
    except CheckFailed as e:
        if driver is not None and shot:
            try:
                driver.save_screenshot(shot)
            except Exception:
                pass
        print(f"{name} FAILED: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        print(f"{name} FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        return 1
    finally:
        if driver is not None:
            driver.quit()
        if profile:
            shutil.rmtree(profile, ignore_errors=True)


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    base, out_dir = sys.argv[1].rstrip("/"), sys.argv[2]
    want = json.loads(sys.argv[3]) if len(sys.argv) == 4 else None
    token = os.environ.get("SERIES_ARCHIVE_TOKEN", "")
    os.makedirs(out_dir, exist_ok=True)
    summary = {"draws": 0, "checked": []}
    try:
        with urllib.request.urlopen(base + "/", timeout=30) as res:
            page = res.read().decode("utf-8", "replace")
    except Exception as e:
        print(f"page check FAILED: could not GET {base}/: {e}", file=sys.stderr)
        return 1
    if "window.seriesView" not in page:
        print(f"page check FAILED: {base}/ does not serve the page", file=sys.stderr)
        return 1
    return run_in_browser("page check", lambda driver: drive(driver, base, token, want, out_dir, summary),
                          os.path.join(out_dir, "page-failed.png"))


def drive(driver, base, token, want, out_dir, summary):
    driver.get(base + "/" + (f"#token={urllib.parse.quote(token)}" if token else ""))
    check(driver.title == "series-archive", f"{base}/ is not the page (title {driver.title!r})")
    check_draw(driver, base, token, "initial view", summary)

    from selenium.webdriver.common.by import By

    if want is None:
        roots = driver.execute_script(
            "return [...document.querySelectorAll('#tracks .node')].map(n => JSON.parse(n.dataset.path))"
            ".filter(p => p.length === 1);"
        )
        check(roots, "the track tree shows no root node")
        first = roots[0]
        children = driver.execute_script(
            "const key = arguments[0]; return [...document.querySelectorAll('#tracks .node')]"
            ".map(n => JSON.parse(n.dataset.path))"
            ".filter(p => p.length === 2 && JSON.stringify(p.slice(0, 1)) === key);",
            json.dumps(first),
        )
        node = find_node(driver, first)
        leaf = "leaf" in node.find_element(By.CSS_SELECTOR, ".caret").get_attribute("class").split()
        if not children and not leaf:
            # Collapsed: open the root's caret.
            node.find_element(By.CSS_SELECTOR, ".caret").click()
            children = driver.execute_script(
                "const key = arguments[0]; return [...document.querySelectorAll('#tracks .node')]"
                ".map(n => JSON.parse(n.dataset.path))"
                ".filter(p => p.length === 2 && JSON.stringify(p.slice(0, 1)) === key);",
                json.dumps(first),
            )
        want = children[0] if children else first
    for depth in range(1, len(want)):
        node = find_node(driver, want[:depth])
        check(node is not None, f"the tree has no node {want[:depth]}")
        if find_node(driver, want) is None:
            node.find_element(By.CSS_SELECTOR, ".caret").click()
    node = find_node(driver, want)
    check(node is not None, f"the tree has no node with data-path {json.dumps(want)}")
    node.click()
    check_draw(driver, base, token, f"track {json.dumps(want)}", summary, track=want)
    selected = driver.execute_script(
        "return [...document.querySelectorAll('#tracks .node.selected')].map(n => n.dataset.path);"
    )
    check(
        [json.loads(p) for p in selected] == [want],
        f"the selected tree node is {selected}, expected {json.dumps(want)}",
    )
    check(f"track={urllib.parse.quote(want[0])}" in driver.execute_script("return location.hash"),
          "the view is not in the URL hash")

    for k in (1, 2):
        driver.find_element(By.ID, "zoom-in").click()
        check_draw(driver, base, token, f"zoom-in {k}", summary, track=want)
    prev = summary["checked"][-2]
    last = summary["checked"][-1]
    w0 = int(prev["to"]) - int(prev["from"])
    w1 = int(last["to"]) - int(last["from"])
    check(abs(w1 * 2 - w0) <= max(2, w0 * 1e-9), f"zoom-in did not halve the view: width {w0} then {w1}")

    # Every survey the browser sent stayed within the budget the plot buys.
    v = view(driver)
    limit = summary["budget_limit"]
    urls = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(u => u.includes('/api/survey'));"
    )
    for u in urls:
        b = int(urllib.parse.parse_qs(urllib.parse.urlparse(u).query)["budget"][0])
        check(b <= limit, f"the browser asked for a budget of {b} (> {limit}): {u}")
    check(
        v["draws"] <= len(urls) <= v["draws"] + 3,
        f"{len(urls)} survey requests for {v['draws']} draws: one survey per view expected",
    )
    stats = driver.find_element(By.ID, "stats").text
    status = driver.find_element(By.ID, "status").text
    check("level" in status and "budget" in status, f"the status line reads {status!r}")
    check(len(v["zoomToDraw"]) >= 2, f"zoomToDraw records {v['zoomToDraw']} for two zooms")
    # Statistics arrive after the draw (percentiles may take a while): wait for them.
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and "…" in stats:
        time.sleep(0.1)
        stats = driver.find_element(By.ID, "stats").text
    check("…" not in stats and "refused" not in stats, f"the statistics panel reads {stats!r}")

    shot = os.path.join(out_dir, "page.png")
    check(driver.save_screenshot(shot), f"could not save {shot}")
    # Script errors fail the check; refused requests (a 416 floor the page narrows past) are
    # the network's, reported in the summary.
    log = driver.get_log("browser")
    severe = [e for e in log if e.get("level") == "SEVERE" and e.get("source") != "network"]
    check(not severe, f"the page logged errors: {severe[:3]}")
    refused = [e["message"] for e in log if e.get("level") == "SEVERE" and e.get("source") == "network"]
    print(json.dumps({
        "ok": True, "draws": v["draws"], "zoom_to_draw_ms": v["zoomToDraw"],
        "survey_requests": len(urls), "budget_limit": limit, "plot_width": v["plot"]["width"],
        "refused_requests": refused,
        "checked": summary["checked"], "screenshot": shot,
    }))
    print(f"PAGE: ok: {len(summary['checked'])} draws equal the API's surveys, no request over a budget of {limit}")
    return 0


def find_node(driver, path):
    from selenium.webdriver.common.by import By

    for el in driver.find_elements(By.CSS_SELECTOR, "#tracks .node"):
        if json.loads(el.get_attribute("data-path")) == path:
            return el if el.is_displayed() else None
    return None


if __name__ == "__main__":
    sys.exit(main())
