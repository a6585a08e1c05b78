package main

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/agent"
	"github.com/evictd/evictd/internal/cgroup/cgrouptest"
	"github.com/evictd/evictd/internal/chart"
	"github.com/evictd/evictd/internal/cli"
	"github.com/evictd/evictd/internal/hostmode/demo"
)

// needBrowser skips a test that needs the real browser when it cannot run
// here, saying why — or fails where it must run: in CI (CI set and not
// "false") and with EVICTD_REQUIRE_REAL_CGROUP=1, the convention of
// cgrouptest.NeedReal, which scripts/test.sh sets in CI after installing
// chromium.
func needBrowser(t *testing.T, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	ci := os.Getenv("CI")
	if os.Getenv(cgrouptest.EnvRequireReal) == "1" || (ci != "" && ci != "false") {
		t.Fatalf("the headless-browser test must run here (CI or %s=1) but needs %s (scripts/test.sh installs chromium)", cgrouptest.EnvRequireReal, why)
	}
	t.Skipf("needs %s (scripts/test.sh unit installs chromium)", why)
}

// chromium runs Debian's chromium headless on a file:// URL inside a fresh
// network namespace that has only a loopback interface (unshare --net), so
// it cannot send a packet off the machine, with a throwaway profile and
// every background service that would phone home turned off.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	needBrowser(t, err == nil, "Debian's chromium (apt package chromium)")
	needBrowser(t, os.Geteuid() == 0, "root, to run chromium in its own network namespace (unshare --net)")
	home := t.TempDir()
	full := append([]string{"--net", "--", bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-breakpad",
		"--disable-dev-shm-usage", "--user-data-dir=" + filepath.Join(home, "profile")}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", full...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestBrowserNamespaceHasOnlyLoopback: the namespace chromium runs in has
// no interface but lo, so the browser test cannot reach the network.
func TestBrowserNamespaceHasOnlyLoopback(t *testing.T) {
	needBrowser(t, os.Geteuid() == 0, "root, to make a network namespace")
	out, err := exec.Command("unshare", "--net", "--", "cat", "/proc/net/dev").Output()
	if err != nil {
		t.Fatal(err)
	}
	var ifaces []string
	for _, l := range strings.Split(string(out), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			ifaces = append(ifaces, name)
		}
	}
	if strings.Join(ifaces, ",") != "lo" {
		t.Fatalf("interfaces in the namespace: %v, want only lo", ifaces)
	}
}

// checkPageInBrowser opens the report page in the real browser: the DOM has
// the chart (an SVG with the markers' labels) and one table row per
// eviction, and in the page's real layout no pod name wraps; the screenshot
// shows the chart as wide as the page (its eviction markers and the
// observed line in their colors) and, below it, the table's text.
func checkPageInBrowser(t *testing.T, page string, evictions int, pods []string) {
	t.Helper()
	url := "file://" + page
	dom := string(chromium(t, "--window-size=1280,2200", "--dump-dom", url))
	chartAt := strings.Index(dom, `<div id="chart">`)
	svgAt := strings.Index(dom, "<svg")
	tableAt := strings.Index(dom, `<table id="evictions"`)
	if chartAt < 0 || svgAt < chartAt || tableAt < svgAt {
		t.Fatalf("the rendered DOM lacks the chart's SVG before the table (chart %d, svg %d, table %d)", chartAt, svgAt, tableAt)
	}
	if n := strings.Count(dom, `<tr class="eviction">`); n != evictions {
		t.Errorf("%d eviction rows in the DOM, want %d", n, evictions)
	}
	for _, p := range pods {
		if !strings.Contains(dom[tableAt:], ">"+p+"<") {
			t.Errorf("pod %s not in the table", p)
		}
		if !strings.Contains(dom[svgAt:tableAt], p+" (") {
			t.Errorf("pod %s has no marker label in the chart", p)
		}
	}
	checkNoPodWraps(t, page)

	shot := filepath.Join(t.TempDir(), "shot.png")
	chromium(t, "--window-size=1280,2200", "--hide-scrollbars", "--screenshot="+shot, url)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	markers := pixelBox(img, chart.MarkerColor)
	line := pixelBox(img, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff})
	if markers.n < 20*evictions || line.n < 100 {
		t.Fatalf("the chart is not on the screenshot: %d marker pixels, %d pixels of the observed line", markers.n, line.n)
	}
	// As wide as the page: the observed line spans most of it (the
	// legend's column takes the rest).
	if w := img.Bounds().Dx(); line.r.Dx() < w*55/100 {
		t.Errorf("the observed line spans %d of the page's %d pixels: the chart does not fill the page's width", line.r.Dx(), w)
	}
	// The table is below the chart: text (dark pixels) under the markers.
	dark := 0
	b := img.Bounds()
	for y := max(markers.r.Max.Y, line.r.Max.Y) + 150; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0x4000 && g < 0x4000 && bl < 0x4000 {
				dark++
			}
		}
	}
	if dark < 2000*evictions {
		t.Errorf("only %d dark pixels below the chart: the table is not rendered", dark)
	}
	t.Logf("screenshot: %d marker pixels in %v, %d observed-line pixels, %d dark pixels below the chart", markers.n, markers.r, line.n, dark)
}

// wrapProbe, added to a copy of the page, measures in the browser's layout
// how many lines each pod name in the tables takes (the name: the start of
// the cell's first text, before " (critical)") and puts the names that
// take more than one in the title.
const wrapProbe = `<script>
const wrapped = [];
for (const td of document.querySelectorAll("#evictions tr.eviction > td:nth-child(3), table.rank td:nth-child(2)")) {
  const node = document.createTreeWalker(td, NodeFilter.SHOW_TEXT).nextNode();
  if (!node) continue;
  const name = td.textContent.split(" (")[0];
  const r = document.createRange();
  r.setStart(node, 0);
  r.setEnd(node, Math.min(name.length, node.length));
  const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
  if (tops.size > 1) wrapped.push(name);
}
document.title = "pod-names-measured:" + document.querySelectorAll("#evictions tr.eviction").length + " wrapped:" + JSON.stringify(wrapped);
</script>`

// checkNoPodWraps opens a copy of the page with wrapProbe in a 1280-pixel
// window and reads what it measured: a pod name broken across lines reads
// as two names.
func checkNoPodWraps(t *testing.T, page string) {
	t.Helper()
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(t.TempDir(), "probe.html")
	if err := os.WriteFile(probe, []byte(strings.Replace(string(html), "</body>", wrapProbe+"</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := string(chromium(t, "--window-size=1280,2200", "--dump-dom", "file://"+probe))
	i := strings.Index(dom, "<title>pod-names-measured:")
	if i < 0 {
		t.Fatal("the probe did not run in the browser")
	}
	title := dom[i+len("<title>") : i+strings.Index(dom[i:], "</title>")]
	if !strings.HasSuffix(title, "wrapped:[]") {
		t.Errorf("pod names wrap in the browser: %s", title)
	}
	t.Logf("layout probe: %s", title)
}

type box struct {
	n int
	r image.Rectangle
}

// pixelBox counts the pixels within a small distance of c and their bounds.
func pixelBox(img image.Image, c color.Color) box {
	cr, cg, cb, _ := c.RGBA()
	near := func(a, b uint32) bool { d := int(a>>8) - int(b>>8); return d < 24 && d > -24 }
	var out box
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, cr) && near(g, cg) && near(bl, cb) {
				if out.n == 0 {
					out.r = image.Rect(x, y, x+1, y+1)
				} else {
					out.r = out.r.Union(image.Rect(x, y, x+1, y+1))
				}
				out.n++
			}
		}
	}
	return out
}

// TestReportInHeadlessChromium renders the committed log of a real demo
// run and opens the page in the browser.
func TestReportInHeadlessChromium(t *testing.T) {
	page := filepath.Join(t.TempDir(), "report.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", "../../internal/report/testdata/demo-decisions.jsonl", "-o", page}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	checkPageInBrowser(t, page, 3, []string{"host/leaky", "host/batch", "host/cache"})
}

// TestReportOfTheDemo runs the real demo with --decision-log (root, real
// cgroups, about 20 s), renders its log and opens the page in the browser.
func TestReportOfTheDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real demo takes about 20 s")
	}
	cgrouptest.RequireV1Memory(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "demo.jsonl")
	// The demo is the agent's command (cmd/evictd); its story runs here
	// from the package, the test binary re-executed as its hogs (TestMain).
	dl, err := agent.OpenDecisionLog(log, agent.DecisionLogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var story bytes.Buffer
	_, err = demo.Run(context.Background(), demo.Options{Out: &story, Exe: os.Args[0], DecisionLog: dl})
	if cerr := dl.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, story.String())
	}
	page := filepath.Join(dir, "demo.html")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"report", log, "-o", page}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("report: exit %d: %s", code, stderr.String())
	}
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	// The demo's story: leaky, batch and cache are evicted, in that order
	// (internal/hostmode/demo checks the story itself).
	html := string(data)
	i, j, k := strings.Index(html, ">host/leaky<"), strings.Index(html, ">host/batch<"), strings.Index(html, ">host/cache<")
	if i < 0 || j < i || k < j {
		t.Fatalf("the report's table does not list leaky, batch and cache in order (%d, %d, %d)", i, j, k)
	}
	checkPageInBrowser(t, page, strings.Count(html, `<tr class="eviction">`), []string{"host/leaky", "host/batch", "host/cache"})
}
