package meta

import (
	"cmp"
	"maps"
	"slices"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// MetaGroup is the group ID of the meta group on every server; FirstGroup
// is the first ID apply allocates to a stream or consumer (package
// comment, "Identities"). raftnode accepts any ID but 0 (GroupID).
const (
	MetaGroup  raftnode.GroupID = 1
	FirstGroup raftnode.GroupID = 2
)

// Replica is one replica of a stream's or consumer's group: its Raft ID,
// its server, and the store incarnation it is bound to (the server's
// incarnation in the catalogue when the replica was created;
// docs/cluster.md decision 3). A server whose store is another one has
// its replica fenced by raftnode.
type Replica struct {
	ID          raftnode.ReplicaID
	Server      raftnode.ServerID
	Incarnation raftnode.Incarnation
}

// StreamAssignment is a stream as the meta group holds it (nats-server's
// streamAssignment without the request's reply and client).
type StreamAssignment struct {
	Account string
	Name    string
	Config  []byte // the API's StreamConfig JSON
	// LogConfig is the config the stream's group log starts from: the
	// config of its AssignStream. An UpdateStream of a stream with more
	// than one replica leaves it, since its replicas take a new config in
	// the order of the stream's own log (docs/cluster.md, "Stream
	// updates"); a replica that starts with an empty store (a memory
	// stream's after a restart, a file stream's first start) must start
	// from it and apply the log's updates in turn. For one replica (no
	// group log) it follows Config.
	LogConfig []byte
	Created   int64 // unix ns
	Group     raftnode.GroupID
	// Replicas are in assignment order (the order of the servers that
	// created or last updated them); NextReplica is the next ID the group
	// gives.
	Replicas    []Replica
	NextReplica raftnode.ReplicaID
	// Move is the stream's move or scale in flight (MoveStream,
	// ScaleStream, CancelMove), nil when none is: until EndMove a second
	// move or a scale is 10124 (a move during a scale 10226, a scale
	// during a scale is taken), and STREAM.CANCEL_MOVE turns it back to
	// its origin (docs/cluster.md, "Moving a stream", "Scaling").
	Move *MoveOrigin
	// Excluded are the servers kept out of this stream's placement
	// (ExcludeServer: evacuated, and no other server could take their
	// replica), sorted; nil once the stream is back at its num_replicas
	// with no replica on any of them (clearExcluded), as nats-server
	// v2.15.2 clears a group's Excluded when it is at its configured
	// replicas.
	Excluded []raftnode.ServerID
}

// MoveOrigin is where a stream's move or scale began, as nats-server
// v2.15.2 records a desired group's origin (desiredRaftGroupOrigin): the
// replicas the stream had and its config's placement then. A move never
// changes the replica count (10123), so a move's origin count is the
// stream's; a scale's is the count a cancel returns it to.
type MoveOrigin struct {
	// Created is the move's start (unix ns): it names the move.
	Created int64
	// Replicas are the stream's replicas when the move began, in order.
	Replicas []Replica
	// Placement is the JSON of the config's placement then, empty when
	// it had none.
	Placement []byte
	// Cancelled: a CancelMove turned the move back to Servers, and the
	// stream is on its way there.
	Cancelled bool
	// Scale: the record is a scale's (ScaleStream), not a move's.
	Scale bool
}

// Moving reports whether a move (not a scale) is recorded: nats-server
// v2.15.2's moveInFlight (a cancelled move still counts; a scale does
// not: docs/cluster.md, "Moving a stream", "Scaling").
func (a StreamAssignment) Moving() bool {
	return a.Move != nil && !a.Move.Scale
}

// Scaling reports whether a scale is recorded (ScaleStream).
func (a StreamAssignment) Scaling() bool {
	return a.Move != nil && a.Move.Scale
}

// Unsettled reports whether the stream has one replica and its group gave
// more than one replica ID: a replicated stream scaled down to one
// replica whose server has not yet reported (SettleStream) that it runs
// the stream without its group (docs/cluster.md, "Scaling down to one
// replica"). A stream created with one replica, or settled, has given
// exactly one.
func (a StreamAssignment) Unsettled() bool {
	return len(a.Replicas) == 1 && a.NextReplica > 2
}

// ConsumerAssignment is a consumer as the meta group holds it.
type ConsumerAssignment struct {
	Account     string
	Stream      string
	Name        string
	Config      []byte // the API's ConsumerConfig JSON
	Created     int64  // unix ns
	Group       raftnode.GroupID
	Replicas    []Replica
	NextReplica raftnode.ReplicaID
	// Initial is how many replicas the consumer's group started with:
	// replica IDs 1 to Initial bootstrap the group together, a later ID
	// (a scale-up) joins it empty and is caught up by its leader
	// (docs/cluster.md, "Scaling consumers"). A consumer created with
	// N replicas has N; one scaled up from one replica keeps 1, since its
	// first replica alone holds the state the group starts from.
	Initial int
}

// Unsettled reports whether the consumer has one replica and its group
// gave more than one replica ID: a replicated consumer scaled down to
// one replica whose server has not yet reported (SettleConsumer) that
// it runs the consumer without its group (docs/cluster.md, "Scaling
// consumers"). A consumer created with one replica, or settled, has
// given exactly one.
func (a ConsumerAssignment) Unsettled() bool {
	return len(a.Replicas) == 1 && a.NextReplica > 2
}

// Server is one server of the catalogue (AddServer).
type Server struct {
	Name        raftnode.ServerID
	Cluster     string
	Tags        []string
	Incarnation raftnode.Incarnation
	Removed     bool
}

// Peers returns the replicas as raftnode peers, for
// raftnode.GroupConfig.Peers.
func Peers(rs []Replica) []raftnode.Peer {
	ps := make([]raftnode.Peer, len(rs))
	for i, r := range rs {
		ps[i] = raftnode.Peer{Replica: r.ID, Server: r.Server}
	}
	return ps
}

// Servers returns the servers of the replicas, in order.
func Servers(rs []Replica) []raftnode.ServerID {
	ss := make([]raftnode.ServerID, len(rs))
	for i, r := range rs {
		ss[i] = r.Server
	}
	return ss
}

// On returns the replica on server s, if any.
func On(rs []Replica, s raftnode.ServerID) (Replica, bool) {
	for _, r := range rs {
		if r.Server == s {
			return r, true
		}
	}
	return Replica{}, false
}

// State is the meta group's state. The zero value is not ready: use
// NewState. Apply changes it; the other methods read it. It is not safe
// for concurrent use (Log guards its State).
type State struct {
	nextGroup raftnode.GroupID
	servers   map[raftnode.ServerID]*Server
	accounts  map[string]map[string]*streamEntry // account -> stream name -> stream
}

type streamEntry struct {
	sa        StreamAssignment
	subjects  []string // from the config, for the overlap check
	consumers map[string]*ConsumerAssignment
}

// NewState returns the empty state: no servers, no streams, the next
// group FirstGroup.
func NewState() *State {
	return &State{nextGroup: FirstGroup, servers: map[raftnode.ServerID]*Server{}, accounts: map[string]map[string]*streamEntry{}}
}

// NextGroup returns the group ID the next assignment will get.
func (s *State) NextGroup() raftnode.GroupID { return s.nextGroup }

// Accounts returns the names of the accounts with streams, sorted.
func (s *State) Accounts() []string {
	return slices.Sorted(maps.Keys(s.accounts))
}

// Streams returns the account's streams, sorted by name.
func (s *State) Streams(account string) []StreamAssignment {
	var out []StreamAssignment
	for _, e := range s.accounts[account] {
		out = append(out, e.sa.clone())
	}
	slices.SortFunc(out, func(a, b StreamAssignment) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Stream returns a stream's assignment.
func (s *State) Stream(account, name string) (StreamAssignment, bool) {
	e := s.stream(account, name)
	if e == nil {
		return StreamAssignment{}, false
	}
	return e.sa.clone(), true
}

// Consumers returns a stream's consumers, sorted by name (none if the
// stream does not exist).
func (s *State) Consumers(account, stream string) []ConsumerAssignment {
	e := s.stream(account, stream)
	if e == nil {
		return nil
	}
	return e.sortedConsumers()
}

// NumConsumers returns how many consumers a stream has, and whether the
// stream exists.
func (s *State) NumConsumers(account, stream string) (int, bool) {
	e := s.stream(account, stream)
	if e == nil {
		return 0, false
	}
	return len(e.consumers), true
}

// Consumer returns a consumer's assignment.
func (s *State) Consumer(account, stream, name string) (ConsumerAssignment, bool) {
	e := s.stream(account, stream)
	if e == nil || e.consumers[name] == nil {
		return ConsumerAssignment{}, false
	}
	return e.consumers[name].clone(), true
}

// Assigned returns the streams and consumers with a replica on server,
// sorted by account, stream and consumer: what that server should run.
func (s *State) Assigned(server raftnode.ServerID) ([]StreamAssignment, []ConsumerAssignment) {
	var ss []StreamAssignment
	var cs []ConsumerAssignment
	for _, e := range s.sortedStreams() {
		if _, ok := On(e.sa.Replicas, server); ok {
			ss = append(ss, e.sa.clone())
		}
		for _, ca := range e.sortedConsumers() {
			if _, ok := On(ca.Replicas, server); ok {
				cs = append(cs, ca)
			}
		}
	}
	return ss, cs
}

// Servers returns the catalogue, removed servers included, sorted by name.
func (s *State) Servers() []Server {
	out := make([]Server, 0, len(s.servers))
	for _, sv := range s.servers {
		out = append(out, sv.clone())
	}
	slices.SortFunc(out, func(a, b Server) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Server returns one server of the catalogue.
func (s *State) Server(name raftnode.ServerID) (Server, bool) {
	sv := s.servers[name]
	if sv == nil {
		return Server{}, false
	}
	return sv.clone(), true
}

// Load returns how many replicas (of streams and consumers) each server
// holds; servers with none are absent. Placement spreads by it.
func (s *State) Load() map[raftnode.ServerID]int {
	load := map[raftnode.ServerID]int{}
	for _, streams := range s.accounts {
		for _, e := range streams {
			for _, r := range e.sa.Replicas {
				load[r.Server]++
			}
			for _, ca := range e.consumers {
				for _, r := range ca.Replicas {
					load[r.Server]++
				}
			}
		}
	}
	return load
}

func (s *State) stream(account, name string) *streamEntry {
	return s.accounts[account][name]
}

// sortedStreams returns every stream, sorted by account and name.
func (s *State) sortedStreams() []*streamEntry {
	var out []*streamEntry
	for _, streams := range s.accounts {
		for _, e := range streams {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *streamEntry) int {
		return cmp.Or(cmp.Compare(a.sa.Account, b.sa.Account), cmp.Compare(a.sa.Name, b.sa.Name))
	})
	return out
}

func (e *streamEntry) sortedConsumers() []ConsumerAssignment {
	out := make([]ConsumerAssignment, 0, len(e.consumers))
	for _, ca := range e.consumers {
		out = append(out, ca.clone())
	}
	slices.SortFunc(out, func(a, b ConsumerAssignment) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func (a StreamAssignment) clone() StreamAssignment {
	if a.Move != nil {
		a.Move = a.Move.clone()
	}
	a.Config = slices.Clone(a.Config)
	a.LogConfig = slices.Clone(a.LogConfig)
	a.Replicas = slices.Clone(a.Replicas)
	a.Excluded = slices.Clone(a.Excluded)
	return a
}

func (m *MoveOrigin) clone() *MoveOrigin {
	c := *m
	c.Replicas = slices.Clone(m.Replicas)
	c.Placement = slices.Clone(m.Placement)
	return &c
}

func (a ConsumerAssignment) clone() ConsumerAssignment {
	a.Config = slices.Clone(a.Config)
	a.Replicas = slices.Clone(a.Replicas)
	return a
}

func (sv Server) clone() Server {
	sv.Tags = slices.Clone(sv.Tags)
	return sv
}
