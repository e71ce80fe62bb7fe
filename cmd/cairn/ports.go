package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cairnmq/cairn/internal/monitor"
	"github.com/cairnmq/cairn/internal/server"
)

// ports is the ports file's content, as nats-server v2.15.2 writes it
// (server.go Ports): the URLs of each listener.
type ports struct {
	Nats       []string `json:"nats,omitempty"`
	Monitoring []string `json:"monitoring,omitempty"`
	Cluster    []string `json:"cluster,omitempty"`
}

// writePortsFile writes <dir>/<executable>_<pid>.ports, as nats-server
// does with ports_file_dir (harnesses started with -p -1 learn the ports
// from it), and returns its path; the caller removes it at exit.
func writePortsFile(dir string, srv *server.Server, mon *monitor.Monitor) (string, error) {
	p := ports{}
	for _, hp := range srv.ListenAddrs() {
		p.Nats = append(p.Nats, "nats://"+hp)
	}
	if mon != nil {
		for _, hp := range mon.ListenAddrs() {
			p.Monitoring = append(p.Monitoring, "http://"+hp)
		}
	}
	for _, hp := range srv.ClusterListenAddrs() {
		p.Cluster = append(p.Cluster, "nats://"+hp)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("%s_%d.ports", filepath.Base(os.Args[0]), os.Getpid()))
	if err := os.WriteFile(path, b, 0o666); err != nil {
		return "", err
	}
	return path, nil
}
