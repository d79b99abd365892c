package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iacp-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "iacp-node")
	if b := os.Getenv("E2E_BINARY"); b != "" {
		binary = b // another build, e.g. an earlier commit's, to measure a change against it
	} else {
		// Built as `make static` builds it (deploy/Dockerfile's binary): TestDeploy checks it.
		build := exec.Command("go", "build", "-trimpath", "-o", binary, "../cmd/iacp-node")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			panic("building iacp-node: " + err.Error())
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is one iacp-node process with its data directory and ports, which survive restarts.
type proc struct {
	t       testing.TB
	name    string
	dir     string
	p2pPort int
	apiPort int
	boot    string
	beat    string   // --heartbeat-interval; 1s unless a test says otherwise
	args    []string // more run flags
	cmd     *exec.Cmd
	log     *lockedBuffer
	token   string
	client  *http.Client
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newProc initialises a data directory with fast retries and 1 s heartbeats. A plain init
// founds a mesh, as an operator's first node does: the node holds the mesh authority's key
// and certifies itself at its first start; others join it with joinProc. initArgs go to
// init: "--open" makes a lab node for a test about open mode.
func newProc(t testing.TB, name, agentID string, initArgs ...string) *proc {
	t.Helper()
	return initProc(t, name, append([]string{"--agent-id", agentID}, initArgs...))
}

// joinProc initialises a data directory that joins founder's mesh the secure way: the
// founder's node (which must be running) issues an invitation for agentID through its API
// (iacp-node invite), and init --join redeems it. The config then names the mesh's authority
// and the founder's address as its bootstrap peer.
func joinProc(t testing.TB, name, agentID string, founder *proc) *proc {
	t.Helper()
	return initProc(t, name, []string{"--join", founder.invite(agentID)})
}

func initProc(t testing.TB, name string, initArgs []string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, dir: filepath.Join(t.TempDir(), name), p2pPort: freePort(t), apiPort: freePort(t),
		beat: "1s", client: &http.Client{Timeout: 30 * time.Second}}
	out, err := exec.Command(binary, append([]string{"init", "--data-dir", p.dir}, initArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("init %s: %v\n%s", name, err, out)
	}
	cfg := filepath.Join(p.dir, "config.yaml")
	b, _ := os.ReadFile(cfg)
	s := strings.Replace(string(b), "retry_min: 1s", "retry_min: 200ms", 1)
	s = strings.Replace(s, "retry_max: 1m0s", "retry_max: 1s", 1)
	if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(filepath.Join(p.dir, "api.token"))
	p.token = strings.TrimSpace(string(tok))
	t.Cleanup(func() {
		p.kill()
		if t.Failed() && p.log != nil {
			t.Logf("--- log of %s:\n%s", p.name, p.log.String())
		}
	})
	return p
}

// invite asks the running node (the mesh's founder) for a one-time invitation bound to
// agentID, as its operator would with iacp-node invite, and returns the token.
func (p *proc) invite(agentID string) string {
	p.t.Helper()
	out, err := exec.Command(binary, "invite", "--data-dir", p.dir, "--api", fmt.Sprintf("127.0.0.1:%d", p.apiPort),
		"--agent", agentID, "-o", "json").Output()
	var doc struct {
		Token string `json:"token"`
	}
	if err != nil || json.Unmarshal(out, &doc) != nil || doc.Token == "" {
		p.t.Fatalf("invite %s on %s: %v\n%s", agentID, p.name, err, out)
	}
	return doc.Token
}

func (p *proc) addr() string { return fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", p.p2pPort) }

// start runs the node and waits until its API answers.
func (p *proc) start() {
	p.t.Helper()
	args := []string{"run", "--data-dir", p.dir, "--listen", p.addr(), "--api", fmt.Sprintf("127.0.0.1:%d", p.apiPort),
		"--nat=false", "--heartbeat-interval", p.beat, "--log-level", logLevel()}
	if p.boot != "" {
		args = append(args, "--bootstrap", p.boot)
	}
	args = append(args, p.args...)
	p.log = &lockedBuffer{}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := p.client.Get(p.url("/healthz"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not start: %s", p.name, p.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peerAddr is the node's full multiaddr, for others to bootstrap from. The line may reach
// the log after the API answers (the process's output is copied by a goroutine of exec), so
// it is waited for a little.
func (p *proc) peerAddr() string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(p.log.String(), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "listen" {
				return f[1]
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s printed no listen address", p.name)
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL and reaps the process.
func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("%s did not stop cleanly: %v\n%s", p.name, err, p.log.String())
	}
	p.cmd = nil
}

func (p *proc) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", p.apiPort, path) }

func (p *proc) do(method, path string, body any) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url(path), r)
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// send posts an event to agent `to` and returns its message id once the node accepted it.
func (p *proc) send(to string, ttl int, n int) (string, error) {
	doc := map[string]any{
		"envelope": map[string]any{"recipient": map[string]any{"agent_id": to}, "ttl_seconds": ttl},
		"message":  map[string]any{"type": "event", "intent": "notify", "payload": map[string]any{"event_type": "work", "n": n}},
	}
	// The outbox's tests queue for agents that are down, or not known yet: queue_unknown.
	code, body, err := p.do("POST", "/.well-known/iacp/v1/message?queue_unknown=true", doc)
	if err != nil {
		return "", err
	}
	if code != http.StatusAccepted {
		return "", fmt.Errorf("send: %d %s", code, body)
	}
	var r struct {
		MessageID string `json:"message_id"`
	}
	err = json.Unmarshal(body, &r)
	return r.MessageID, err
}

type inboxMsg struct {
	Message struct {
		Envelope struct {
			MessageID     string `json:"message_id"`
			CorrelationID string `json:"correlation_id"`
		} `json:"envelope"`
		Message struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"message"`
	} `json:"message"`
}

func (p *proc) inbox() ([]inboxMsg, error) {
	code, body, err := p.do("GET", "/v1/inbox", nil)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("inbox: %d %s", code, body)
	}
	var r struct {
		Messages []inboxMsg `json:"messages"`
	}
	err = json.Unmarshal(body, &r)
	return r.Messages, err
}

func (p *proc) ack(id string) error {
	code, body, err := p.do("POST", "/v1/inbox/"+id+"/ack", nil)
	if err != nil {
		return err
	}
	if code/100 != 2 {
		return fmt.Errorf("ack: %d %s", code, body)
	}
	return nil
}

func (p *proc) outboxLen() int {
	_, body, err := p.do("GET", "/v1/outbox", nil)
	if err != nil {
		return -1
	}
	var r struct {
		Entries []json.RawMessage `json:"entries"`
	}
	_ = json.Unmarshal(body, &r)
	return len(r.Entries)
}

// takeAll pulls and acknowledges until want distinct messages were taken or the deadline.
// taken counts how often each id was taken: exactly once is the promise.
func takeAll(t *testing.T, p *proc, want int, d time.Duration, taken map[string]int) {
	t.Helper()
	takeUntil(p, d, taken, func() bool { return len(taken) >= want })
}

// takeUntil pulls and acknowledges until done holds or the deadline passes.
func takeUntil(p *proc, d time.Duration, taken map[string]int, done func() bool) {
	deadline := time.Now().Add(d)
	for !done() && time.Now().Before(deadline) {
		msgs, err := p.inbox()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for _, m := range msgs {
			id := m.Message.Envelope.MessageID
			if err := p.ack(id); err == nil {
				taken[id]++
			}
		}
		if len(msgs) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// logLevel is the nodes' --log-level: warn, or E2E_LOG_LEVEL.
func logLevel() string {
	if l := os.Getenv("E2E_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}
