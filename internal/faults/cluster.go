package faults

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is one server process of a Cluster.
type Server struct {
	Name   string // server name (-n)
	URL    string // client URL
	Mon    string // monitoring URL (-m)
	store  string // JetStream store directory (-sd)
	args   []string
	logf   string
	proxy  *proxy
	cmd    *exec.Cmd
	exited chan struct{}
	state  string // "running", "killed", "paused"
}

// Cluster is a cluster of server processes on loopback started the way
// README's "Run a cluster" starts them (-js, a store directory each, the
// same --routes on every server), with every cluster connection through
// Net. The flags are nats-server's, so Bin may be cairn or nats-server.
type Cluster struct {
	Bin     string
	Dir     string
	Servers []*Server
	Net     *Net
	mu      sync.Mutex // guards the servers' cmd and state
}

// StartCluster starts n servers of bin with their stores and logs under
// dir, and waits until each accepts clients. On error the processes
// started are killed.
func StartCluster(bin, dir string, n int) (*Cluster, error) {
	c := &Cluster{Bin: bin, Dir: dir}
	c.Net = newNet(c.pids)
	var routes []string
	// The proxies listen first, so that the ports chosen next avoid theirs.
	proxies := make([]*proxy, n)
	for i := range proxies {
		p, err := c.Net.addProxy("n"+strconv.Itoa(i+1), "")
		if err != nil {
			c.Close()
			return nil, err
		}
		proxies[i] = p
	}
	ports, err := freePorts(3 * n)
	if err != nil {
		c.Close()
		return nil, err
	}
	for i := 0; i < n; i++ {
		name := "n" + strconv.Itoa(i+1)
		clusterPort, clientPort, monPort := ports[3*i], ports[3*i+1], ports[3*i+2]
		p := proxies[i]
		p.setTarget("127.0.0.1:" + strconv.Itoa(clusterPort))
		s := &Server{Name: name, URL: "nats://127.0.0.1:" + strconv.Itoa(clientPort), proxy: p,
			Mon:   "http://127.0.0.1:" + strconv.Itoa(monPort),
			store: filepath.Join(dir, name), logf: filepath.Join(dir, name+".log"), state: "killed"}
		s.args = []string{"-a", "127.0.0.1", "-p", strconv.Itoa(clientPort), "-m", strconv.Itoa(monPort), "-n", name,
			"-js", "-sd", s.store, "--cluster", "nats://127.0.0.1:" + strconv.Itoa(clusterPort),
			"--cluster_advertise", p.addr(), "--cluster_name", "FAULTS"}
		routes = append(routes, "nats://"+p.addr())
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		s.args = append(s.args, "--routes", strings.Join(routes, ","))
	}
	if err := c.Start(c.all()...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) all() []int {
	idx := make([]int, len(c.Servers))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// pids maps the running servers' process ids to their names.
func (c *Cluster) pids() map[int]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[int]string{}
	for _, s := range c.Servers {
		if s.cmd != nil && s.state != "killed" {
			m[s.cmd.Process.Pid] = s.Name
		}
	}
	return m
}

// Start starts the servers at the given indexes (all at once) and waits
// until each accepts TCP connections on its client port (30 s at most).
func (c *Cluster) Start(idx ...int) error {
	for _, i := range idx {
		if err := c.spawn(c.Servers[i]); err != nil {
			return err
		}
	}
	for _, i := range idx {
		s := c.Servers[i]
		if err := Until(30*time.Second, func() error {
			select {
			case <-s.exited:
				return fmt.Errorf("%s exited at start (log %s)", s.Name, s.logf)
			default:
			}
			return Accepts(s.URL)
		}); err != nil {
			return fmt.Errorf("%s does not accept clients: %w", s.Name, err)
		}
	}
	return nil
}

func (c *Cluster) spawn(s *Server) error {
	logf, err := os.OpenFile(s.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "=== %s start %s\n", time.Now().UTC().Format(time.RFC3339Nano), s.Name)
	cmd := exec.Command(c.Bin, s.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", c.Bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	c.mu.Lock()
	s.cmd, s.exited, s.state = cmd, exited, "running"
	c.mu.Unlock()
	return nil
}

// Kill sends SIGKILL to the servers at idx (a paused one too) and waits
// until they are gone.
func (c *Cluster) Kill(idx ...int) {
	for _, i := range idx {
		s := c.Servers[i]
		c.mu.Lock()
		cmd, state := s.cmd, s.state
		s.state = "killed"
		c.mu.Unlock()
		if cmd == nil || state == "killed" {
			continue
		}
		_ = cmd.Process.Kill()
		<-s.exited
	}
}

// Pause sends SIGSTOP to server i; Resume sends SIGCONT.
func (c *Cluster) Pause(i int) { c.signal(i, syscall.SIGSTOP, "paused") }

// Resume sends SIGCONT to server i.
func (c *Cluster) Resume(i int) { c.signal(i, syscall.SIGCONT, "running") }

func (c *Cluster) signal(i int, sig syscall.Signal, state string) {
	s := c.Servers[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.cmd != nil && s.state != "killed" {
		_ = s.cmd.Process.Signal(sig)
		s.state = state
	}
}

// Wipe removes server i's store directory; the server must be killed.
func (c *Cluster) Wipe(i int) error { return os.RemoveAll(c.Servers[i].store) }

// Running reports whether server i runs and is not paused.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Servers[i].state == "running"
}

// Close kills every server and closes the proxies.
func (c *Cluster) Close() {
	for i := range c.Servers {
		c.Resume(i)
	}
	c.Kill(c.all()...)
	for _, p := range c.Net.proxies {
		p.close()
	}
}

// Index returns the index of the server named name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.Servers {
		if s.Name == name {
			return i
		}
	}
	return -1
}

// Accepts reports whether the server of url (nats://host:port) accepts a
// TCP connection within a second: nil when it does, the dial error when
// it does not.
func Accepts(url string) error {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), time.Second)
	if err == nil {
		conn.Close()
	}
	return err
}

// freePorts returns n distinct loopback ports nothing listens on now:
// all n are held open together, so that none is handed out twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Until retries f every 50 ms until it succeeds or d has passed, and
// returns its last error.
func Until(d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pid returns server i's process id, or 0 when it does not run.
func (c *Cluster) Pid(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.Servers[i]
	if s.cmd == nil || s.state == "killed" {
		return 0
	}
	return s.cmd.Process.Pid
}

// Binaries maps the server names the fault and idle programs take
// ("cairn", "nats-server") to their binaries: cairn's and nats-server's
// as given, nats-server's found on PATH or in ~/go/bin (where `go
// install` puts it) when not given.
func Binaries(cairn, natsServer string) map[string]string {
	if natsServer == "" {
		natsServer = "nats-server"
		if p, err := exec.LookPath("nats-server"); err == nil {
			natsServer = p
		} else if home, err := os.UserHomeDir(); err == nil {
			natsServer = filepath.Join(home, "go", "bin", "nats-server")
		}
	}
	return map[string]string{"cairn": cairn, "nats-server": natsServer}
}
