package netlab

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	// full runs the measurements of `make netlab` (docs/bench.md) instead of the short
	// scenarios of `make test`.
	full = flag.Bool("netlab.full", false, "run the full measurements (20 hole punches per NAT type, a 1-minute partition)")
	// report, with -netlab.full, is where the measurements are written as markdown.
	report = flag.String("netlab.report", "", "write the measurements to this file (markdown)")
)

var (
	binary string
	// unavailable says why the lab cannot run here ("" when it can).
	unavailable string

	labsMu sync.Mutex
	labs   = map[*Lab]bool{} // open labs, closed on SIGINT/SIGTERM

	measuresMu sync.Mutex
	measures   []measure // what the scenarios measured, for -netlab.report
)

// measure is one number a scenario measured.
type measure struct{ Test, What, Value string }

// writeReport writes the measurements as a markdown table to path.
func writeReport(path string) error {
	measuresMu.Lock()
	defer measuresMu.Unlock()
	var b strings.Builder
	b.WriteString("| scenario | what | measured |\n|---|---|---|\n")
	for _, m := range measures {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", m.Test, m.What, m.Value)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func TestMain(m *testing.M) {
	if h := os.Getenv("NETLAB_HELPER"); h != "" {
		os.Exit(helper(h))
	}
	flag.Parse()
	// The scenarios run side by side, each in its own lab: most of their time is spent waiting
	// on timers, not the CPU. go test's default, GOMAXPROCS, would run two at a time.
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == fmt.Sprint(runtime.GOMAXPROCS(0)) {
		_ = flag.Set("test.parallel", "6")
	}
	if err := Available(); err != nil {
		unavailable = err.Error()
		fmt.Println("netlab: skipped: " + unavailable)
	}
	dir, err := os.MkdirTemp("", "netlab")
	if err != nil {
		panic(err)
	}
	code := 1
	if unavailable == "" {
		code = setup(dir, m)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup builds the binary, closes every open lab on SIGINT or SIGTERM, and runs the tests.
func setup(dir string, m *testing.M) int {
	binary = filepath.Join(dir, "iacp-node")
	if b := os.Getenv("E2E_BINARY"); b != "" {
		binary = b
	} else {
		// Built as the e2e tests build it (`make static`), so that the two share one build.
		build := exec.Command("go", "build", "-trimpath", "-o", binary, "../../cmd/iacp-node")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building iacp-node:", err)
			return 1
		}
	}
	sigs := make(chan os.Signal, 1)
	stop := make(chan struct{})
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-sigs:
			closeAll()
			fmt.Fprintf(os.Stderr, "netlab: %v: every lab closed\n", s)
			os.Exit(2)
		case <-stop:
		}
	}()
	code := m.Run()
	signal.Stop(sigs)
	close(stop)
	wg.Wait()
	closeAll()
	if *report != "" {
		if err := writeReport(*report); err != nil {
			fmt.Fprintln(os.Stderr, "netlab: report:", err)
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

func closeAll() {
	labsMu.Lock()
	defer labsMu.Unlock()
	for l := range labs {
		_ = l.Close()
		delete(labs, l)
	}
}

// newLab makes a lab closed at the end of the test (and on SIGINT or SIGTERM), or skips the
// test with the reason the machine cannot make one.
func newLab(t testing.TB) *Lab {
	t.Helper()
	if unavailable != "" {
		t.Skip("netlab: " + unavailable)
	}
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	labsMu.Lock()
	labs[l] = true
	labsMu.Unlock()
	t.Cleanup(func() {
		labsMu.Lock()
		delete(labs, l)
		labsMu.Unlock()
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// helper is the test binary run inside a namespace: "listen:ADDR" accepts one TCP connection
// and answers with the address it came from; "dial:ADDR" connects and prints the answer.
func helper(spec string) int {
	mode, addr, _ := strings.Cut(spec, ":")
	switch mode {
	case "listen":
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		fmt.Println("listening")
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		fmt.Fprintln(c, c.RemoteAddr().(*net.TCPAddr).IP)
		c.Close()
		return 0
	case "dial":
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			return 1
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		b, _ := io.ReadAll(c)
		fmt.Print(string(b))
		return 0
	}
	return 2
}
