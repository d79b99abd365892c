package netlab

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
)

// Proc is a process started in a host of the lab; the lab kills it on Close.
type Proc struct {
	cmd  *exec.Cmd
	out  *buffer
	once sync.Once
	done chan struct{}
	err  error
}

// Start runs args inside h's namespace, its output kept (Output). The process is in a process
// group of its own and is killed when the test process dies (Pdeathsig) or the lab closes.
func (h *Host) Start(args ...string) (*Proc, error) {
	p := &Proc{out: &buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", h.Name}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	h.lab.mu.Lock()
	defer h.lab.mu.Unlock()
	if h.lab.closed {
		return nil, errClosed
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	h.lab.procs = append(h.lab.procs, p)
	return p, nil
}

// Output is what the process printed so far.
func (p *Proc) Output() string { return p.out.String() }

// Done is closed when the process has exited; Err then says how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error, once Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// Signal sends sig to the process.
func (p *Proc) Signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// Kill kills the process's group with SIGKILL and waits for it.
func (p *Proc) Kill() {
	p.once.Do(func() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
	<-p.done
}

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
