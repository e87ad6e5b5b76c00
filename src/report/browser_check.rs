//! The pages as a browser lays them out: a profile's report.html (built
//! from the fixtures, with a long function name in its headline, advice,
//! caveats, the anatomy and stacks) and the demo's (the v2 fixture, with
//! more connection counts so that its bars are narrow and their values
//! close), each rendered by headless Chromium at 1400 and 800 px wide.
//!
//! A copy of each page with a small script added measures the laid-out
//! DOM and writes what it found into the DOM, which `--dump-dom` returns:
//! no two text labels of a chart overlap, nothing is wider than the
//! viewport, and no scrolling box hides part of its content (a table
//! column off the right edge). Screenshots of the pages as they are (no
//! script) are left in target/test-artifacts/pages/ for people to look
//! at. Chromium missing: a printed skip, or a failure under CI=true.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::report::bench::DemoReport;
use crate::report::fixtures;
use crate::report::sections::page::profile_page;
use crate::report::stacks::TopFunction;
use crate::report::tune::AuditRow;

/// Widths checked: a desktop window and a narrow one.
const WIDTHS: [u32; 2] = [1400, 800];

/// The longest one Chromium run may take (a hang guard: each takes a
/// second or two).
const CHROMIUM_LIMIT: Duration = Duration::from_secs(60);

/// Measures the page once laid out and writes the problems it finds, one
/// a line, into `<pre id="layout-check">`.
const CHECK: &str = r#"<script>(function () {
  var out = [];
  var vw = document.documentElement.clientWidth;
  function name(e) {
    var holder = e.closest('[id]');
    var cls = e.getAttribute('class');
    return e.tagName.toLowerCase() + (cls ? '.' + cls : '') + ' in #' + (holder ? holder.id : '?');
  }
  if (document.documentElement.scrollWidth > vw + 1) {
    out.push('the page is ' + document.documentElement.scrollWidth + ' px wide in ' + vw + ' px');
  }
  var bad = new Set();
  var all = document.body.getElementsByTagName('*');
  for (var i = 0; i < all.length; i++) {
    var e = all[i];
    if (e.parentElement && bad.has(e.parentElement)) { bad.add(e); continue; }
    var r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 1) {
      bad.add(e);
      out.push('wider than the viewport: ' + name(e) + ' reaches ' + Math.round(r.right) + ' px');
      continue;
    }
    var ox = getComputedStyle(e).overflowX;
    var clamped = e.classList.contains('value');
    if (ox !== 'visible' && !clamped && e.scrollWidth > e.clientWidth + 1) {
      bad.add(e);
      out.push('cut off on the right: ' + name(e) + ' holds ' + e.scrollWidth + ' px in ' + e.clientWidth);
    }
  }
  var svgs = document.querySelectorAll('svg');
  for (var s = 0; s < svgs.length; s++) {
    var boxes = [];
    var ts = svgs[s].querySelectorAll('text');
    for (var k = 0; k < ts.length; k++) {
      if (ts[k].textContent.trim()) boxes.push([ts[k].textContent, ts[k].getBoundingClientRect()]);
    }
    for (var a = 0; a < boxes.length; a++) {
      for (var b = a + 1; b < boxes.length; b++) {
        var p = boxes[a][1], q = boxes[b][1];
        var w = Math.min(p.right, q.right) - Math.max(p.left, q.left);
        var h = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
        if (w > 1 && h > 1) {
          out.push('labels overlap in ' + name(svgs[s]) + ': "' + boxes[a][0] + '" and "' + boxes[b][0] + '"');
        }
      }
    }
  }
  var tiles = document.querySelectorAll('.headline .value');
  for (var t = 0; t < tiles.length; t++) {
    var tile = tiles[t].parentElement.getBoundingClientRect();
    var v = tiles[t].getBoundingClientRect();
    if (v.right > tile.right + 1 || tiles[t].scrollWidth > tiles[t].clientWidth + 1) {
      out.push('a headline value overflows its tile: ' + tiles[t].title);
    }
  }
  var pre = document.createElement('pre');
  pre.id = 'layout-check';
  pre.textContent = 'height ' + document.documentElement.scrollHeight + '\n' + out.join('\n');
  document.body.appendChild(pre);
})();</script>"#;

fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser"].iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// Runs headless Chromium on `page` with `extra` arguments, bounded by
/// [`CHROMIUM_LIMIT`]; returns its stdout.
fn run_chromium(bin: &Path, page: &Path, extra: &[String], scratch: &Path) -> String {
    let mut child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--hide-scrollbars",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("chromium-profile").display()
        ))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting chromium");
    let mut so = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for chromium") {
            break st;
        }
        if start.elapsed() > CHROMIUM_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium took over {CHROMIUM_LIMIT:?} on {}",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().unwrap();
    assert!(
        status.success(),
        "chromium failed ({status}) on {}",
        page.display()
    );
    out
}

/// A profile with everything the page can show, and a generated C++ name
/// as its hottest function.
fn profile_html() -> String {
    let mut r = fixtures::profile(&fixtures::forking_server());
    r.anatomy = Some(fixtures::anatomy());
    let mut stacks = fixtures::stacks(1);
    stacks.on_cpu.top.insert(
        0,
        TopFunction {
            name: "std::__detail::_Executor<__gnu_cxx::__normal_iterator<char const*, \
                   std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > >, \
                   std::allocator<std::__cxx11::sub_match<__gnu_cxx::__normal_iterator<char const*, \
                   std::__cxx11::basic_string<char> > > >, std::__cxx11::regex_traits<char>, true>::_M_dfs"
                .into(),
            module: "/usr/sbin/server".into(),
            kernel: false,
            self_weight: 900,
            total_weight: 900,
            self_share: 0.9,
            total_share: 0.9,
        },
    );
    r.stacks = Some(stacks);
    r.caveats.push("A caveat of this run.".into());
    r.advice.push(AuditRow {
        setting: "net.core.somaxconn".into(),
        current: "128".into(),
        advised: ">= 4096".into(),
        ok: false,
        why: "the listen queue overflowed".into(),
        evidence: Some("TcpExt.ListenOverflows +1204 during the run".into()),
        sysctl: Some("net.core.somaxconn = 4096".into()),
    });
    profile_page(&r)
}

/// The demo fixture with four connection counts under tcp-rr, whose
/// rates differ by under 1 %: narrow bars with near labels.
fn demo_html() -> String {
    let mut v: serde_json::Value =
        serde_json::from_str(include_str!("../../tests/fixtures/v2/demo-quick.json")).unwrap();
    let points = v["experiments"][0]["transport"]["points"]
        .as_array_mut()
        .unwrap();
    let rr: Vec<serde_json::Value> = points
        .iter()
        .filter(|p| p["workload"] == "tcp-rr" && p["connections"] == 1)
        .cloned()
        .collect();
    for (i, p) in rr.iter().enumerate() {
        for c in [16, 256] {
            let mut p = p.clone();
            p["connections"] = c.into();
            p["rate_per_s"] = (65_100.0 - 400.0 * i as f64).into();
            p["run"] = format!(
                "runs/{}-tcp-rr-{c}/run.json",
                p["transport"].as_str().unwrap()
            )
            .into();
            points.push(p);
        }
    }
    let d: DemoReport = serde_json::from_value(v).unwrap();
    crate::report::bench::page::demo_page(&d)
}

#[test]
fn the_pages_fit_their_window_and_no_labels_overlap_in_chromium() {
    let Some(bin) = chromium() else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("chromium is not installed under CI (make deps installs it)");
        }
        eprintln!("SKIP: chromium is not installed (make deps)");
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts/pages");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut problems = Vec::new();
    for (name, html) in [("profile", profile_html()), ("demo", demo_html())] {
        // No script of the page's own (the flame graphs' run in frames).
        let outside_frames = html
            .split("<iframe")
            .map(|p| p.split_once("</iframe>").map_or(p, |x| x.1));
        assert!(
            outside_frames.clone().all(|p| !p.contains("<script")),
            "{name}: a script outside the flame graphs' frames"
        );
        assert!(
            html.contains("<nav class=\"contents\""),
            "{name}: no contents bar"
        );
        let page = dir.join(format!("{name}.html"));
        std::fs::write(&page, &html).unwrap();
        let checked = dir.join(format!("{name}-checked.html"));
        std::fs::write(
            &checked,
            html.replace("</body>", &format!("{CHECK}</body>")),
        )
        .unwrap();
        for w in WIDTHS {
            let dom = run_chromium(
                &bin,
                &checked,
                &[format!("--window-size={w},900"), "--dump-dom".into()],
                &dir,
            );
            let Some(at) = dom.find("<pre id=\"layout-check\">") else {
                panic!("{name} at {w} px: the check wrote nothing");
            };
            let found = &dom[at + 23..];
            let found = &found[..found.find("</pre>").unwrap()];
            let mut lines = found.lines();
            let height: u32 = lines
                .next()
                .and_then(|l| l.strip_prefix("height "))
                .and_then(|h| h.parse().ok())
                .expect("the page's height");
            problems.extend(lines.map(|l| format!("{name} at {w} px: {l}")));
            let png = dir.join(format!("{name}-{w}.png"));
            run_chromium(
                &bin,
                &page,
                &[
                    format!("--window-size={w},{}", height.clamp(600, 16_000)),
                    format!("--screenshot={}", png.display()),
                ],
                &dir,
            );
            let head = std::fs::read(&png).unwrap_or_else(|e| panic!("{}: {e}", png.display()));
            assert_eq!(&head[..8], b"\x89PNG\r\n\x1a\n");
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
