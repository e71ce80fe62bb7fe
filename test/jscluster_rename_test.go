package test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
)

// A server restarted under another name (-n) over its store directory
// joins the meta group under the new name, as nats-server v2.15.2 adds it
// as a new peer (its old name stays listed, offline, until removed), and
// its /healthz turns 200. cairn keeps it outside: the restarted server logs
// "the meta group cannot start: this server "n3x" is not among the members"
// and its /healthz answers 503 "JetStream cluster waits to enter its meta
// group" for ever, while the others log that n3x "is not in this server's
// meta group".
func TestJetStreamClusterRenamedServerJoins(t *testing.T) {
	t.Skip("cairn keeps a server renamed over its store outside the meta group (found by an operator trial); nats-server adds it as a new peer")
	if testing.Short() {
		t.Skip("starts cairn processes")
	}
	if targetIsNatsServer() {
		t.Skip("cairn processes")
	}
	bin := buildCairn(t)
	mon := []int{freePort(t), freePort(t), freePort(t)}
	kc := newKillClusterArgs(t, bin, 3, func(i int) []string {
		return []string{"-js", "-sd", t.TempDir(), "-m", strconv.Itoa(mon[i])}
	})
	eventually(t, "a meta group of three", func() error { return metaHas(mon, []string{"n1", "n2", "n3"}, 3, "n3") })
	p := kc.procs[2]
	p.kill()
	p.args[slices.Index(p.args, "-n")+1] = "n3x"
	p.start()
	eventually(t, "n3x in the meta group and healthy", func() error {
		if err := metaHas(mon, []string{"n1", "n2", "n3x"}, 4, "n3x"); err != nil {
			return err
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", mon[2]))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("n3x /healthz %d", resp.StatusCode)
		}
		return nil
	})
}

// metaHas reports nil when the meta leader (names[i] is the server of
// monitoring port ports[i]; only the leader knows whether its followers
// are current) counts size servers and lists name as a current replica
// (or is name).
func metaHas(ports []int, names []string, size int, name string) error {
	for i, port := range ports {
		m, err := procMeta(port)
		if err != nil || m.Meta == nil || m.Meta.Leader != names[i] {
			continue
		}
		if m.Meta.Size != size {
			return fmt.Errorf("meta size %d, want %d: %+v", m.Meta.Size, size, *m.Meta)
		}
		if m.Meta.Leader == name {
			return nil
		}
		for _, r := range m.Meta.Replicas {
			if r.Name == name && r.Current {
				return nil
			}
		}
		return fmt.Errorf("%s not a current replica: %+v", name, *m.Meta)
	}
	return fmt.Errorf("no meta leader answering")
}
