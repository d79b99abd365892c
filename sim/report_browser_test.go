package sim

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium returns the path of a Chromium to render pages with, or skips the test saying how
// to get one (`make chromium` installs Debian's package; `make test` tries it first).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium to render the HTML report in: `make chromium` installs Debian's chromium package (as root), or put chromium on the PATH")
	return ""
}

// headless runs Chromium headless on the page with args (the flags this machine needs: no
// sandbox as root, no GPU, no network of its own, a fresh profile) and returns its stdout.
func headless(t *testing.T, bin, page string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, args...)
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, append(all, "file://"+page)...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// The HTML report, as a browser shows it: the headline figures first, a row per step with its
// key figures and every metric behind a toggle, and the plots drawn (cost per node, the
// virtual clock against the wall clock, latency, propagation, liveness); a screenshot of it is
// a page with something on it.
func TestReport_RendersInChromium(t *testing.T) {
	bin := chromium(t)
	rep := runScenario(t, DefaultScenario)
	page := filepath.Join(t.TempDir(), "report.html")
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, html.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	dom := headless(t, bin, page, "--dump-dom")
	headline := dom[strings.Index(dom, `id="headline"`):strings.Index(dom, `id="steps"`)]
	for _, want := range []string{"nodes", "clock", "virtual", "converged after", "delivered", "false suspicions", "request p99", "memory per node", "CPU per node"} {
		if !strings.Contains(headline, want) {
			t.Errorf("the headline lacks %q", want)
		}
	}
	if got := strings.Count(dom, "<details>"); got != len(rep.Steps) {
		t.Errorf("%d toggles of every metric for %d steps", got, len(rep.Steps))
	}
	for _, title := range []string{"CPU per node, step by step", "The virtual clock against the wall clock", "Latency CDF", "Broadcast and group propagation", "Liveness timeline"} {
		i := strings.Index(dom, title)
		if i < 0 {
			t.Errorf("no plot %q", title)
			continue
		}
		svg := dom[i:]
		svg = svg[:strings.Index(svg, "</svg>")]
		if strings.Contains(svg, "nothing measured") || !strings.Contains(svg, "<polyline") && !strings.Contains(svg, "<circle") {
			t.Errorf("plot %q draws nothing", title)
		}
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	headless(t, bin, page, "--window-size=1200,2000", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if inked := inkedShare(img); inked < 0.02 {
		t.Fatalf("the screenshot is %.1f %% ink: the page rendered nearly blank", 100*inked)
	}
}

// inkedShare is the share of an image's pixels that are not white.
func inkedShare(img image.Image) float64 {
	b := img.Bounds()
	inked, all := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			all++
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				inked++
			}
		}
	}
	return float64(inked) / float64(max(all, 1))
}
