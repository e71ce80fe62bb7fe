package meta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/raftnode"
	"github.com/cairnmq/cairn/internal/subject"
)

// Result is the outcome of one applied operation: what the proposer
// answers the client with, and what a server watching the log
// (Config.OnApply) starts or stops. Assignments in it are copies.
type Result struct {
	// Err is an outcome that changed nothing, with nats-server v2.15.2's
	// code: 10058 stream name in use with another config, 10059 stream
	// not found, 10065 subject overlap, 10005 no suitable peers (a named
	// server is not, or no longer, a member), 10148 consumer already
	// exists, 10149 consumer does not exist, 10014 consumer not found,
	// 10023 insufficient resources (a consumer server not among its
	// stream's), 10044 server not a member, 10124 stream move already in
	// progress, 10129 stream reconfiguration not in progress.
	Err *jserr.Error
	// Existed: the stream or consumer already existed with the same
	// config; nothing changed (an idempotent create, answered with the
	// existing assignment).
	Existed bool
	// Stream is the stream after AssignStream or UpdateStream (its
	// existing assignment when Existed), the stream removed by
	// RemoveStream, or the consumer's stream after AssignConsumer.
	Stream *StreamAssignment
	// Consumer is the consumer after AssignConsumer, or the one removed.
	Consumer *ConsumerAssignment
	// PrevStream and PrevConsumer are the assignment an update replaced,
	// so a watcher sees which replicas left.
	PrevStream   *StreamAssignment
	PrevConsumer *ConsumerAssignment
	// Consumers are the consumers removed with their stream, or given
	// new groups with it by ResetStream, by name.
	Consumers []ConsumerAssignment
}

func fail(c jserr.ErrCode, args ...jserr.Arg) Result { return Result{Err: jserr.New(c, args...)} }

// noPeers is nats-server's 10005 with its plain description, as
// selectPeerError gives it without reasons.
func noPeers() Result {
	return fail(jserr.ClusterNoPeers, jserr.Sub("err", "no suitable peers for placement"))
}

// Apply applies one operation and returns its outcome. It is a pure
// function of the state and the operation (docs/cluster.md decision
// 6): no clock, randomness, map order or local configuration, so every
// server applying the same operations in the same order holds the same
// state. op must be valid as AppendOp accepts it (DecodeOp's operations
// are); Apply panics on a type it does not know.
func (s *State) Apply(op Op) Result {
	switch o := op.(type) {
	case *AssignStream:
		return s.assignStream(o)
	case *UpdateStream:
		return s.updateStream(o)
	case *RemoveStream:
		return s.removeStream(o)
	case *AssignConsumer:
		return s.assignConsumer(o)
	case *RemoveConsumer:
		return s.removeConsumer(o)
	case *AddServer:
		s.servers[o.Name] = &Server{Name: o.Name, Cluster: o.Cluster, Tags: slices.Clone(o.Tags), Incarnation: o.Incarnation}
		return Result{}
	case *MoveReplica:
		return s.moveReplica(o)
	case *SettleStream:
		return s.settleStream(o)
	case *ResetStream:
		return s.resetStream(o)
	case *SettleConsumer:
		return s.settleConsumer(o)
	case *MoveConsumer:
		return s.moveConsumer(o)
	case *MoveStream:
		return s.moveStream(o)
	case *ScaleStream:
		return s.scaleStream(o)
	case *CancelMove:
		return s.cancelMove(o)
	case *EndMove:
		return s.endMove(o)
	case *RenameReplicas:
		return s.renameReplicas(o)
	case *ExcludeServer:
		return s.excludeServer(o)
	case *RemoveServer:
		sv := s.servers[o.Name]
		if sv == nil || sv.Removed {
			return fail(jserr.ClusterServerNotMember)
		}
		sv.Removed = true
		return Result{}
	default:
		panic(fmt.Sprintf("meta: Apply of an operation of type %T", op))
	}
}

func (s *State) assignStream(o *AssignStream) Result {
	if e := s.stream(o.Account, o.Name); e != nil {
		if !bytes.Equal(e.sa.Config, o.Config) {
			return fail(jserr.StreamNameExist)
		}
		sa := e.sa.clone()
		return Result{Existed: true, Stream: &sa}
	}
	f, _ := parseStream(o.Config) // valid: check passed
	if s.overlaps(o.Account, o.Name, f.Subjects) {
		return fail(jserr.StreamSubjectOverlap)
	}
	if !s.members(o.Servers, nil) {
		return noPeers()
	}
	e := &streamEntry{subjects: f.Subjects, consumers: map[string]*ConsumerAssignment{}}
	e.sa = StreamAssignment{Account: o.Account, Name: o.Name, Config: slices.Clone(o.Config), LogConfig: slices.Clone(o.Config),
		Created: o.Created, Group: s.allocGroup(), NextReplica: 1}
	e.sa.Replicas = s.replicas(nil, o.Servers, &e.sa.NextReplica)
	if s.accounts[o.Account] == nil {
		s.accounts[o.Account] = map[string]*streamEntry{}
	}
	s.accounts[o.Account][o.Name] = e
	sa := e.sa.clone()
	return Result{Stream: &sa}
}

func (s *State) updateStream(o *UpdateStream) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	f, _ := parseStream(o.Config)
	if s.overlaps(o.Account, o.Name, f.Subjects) {
		return fail(jserr.StreamSubjectOverlap)
	}
	if !s.members(o.Servers, e.sa.Replicas) {
		return noPeers()
	}
	prev := e.sa.clone()
	e.sa.Config = slices.Clone(o.Config)
	e.subjects = f.Subjects
	e.sa.Replicas = s.replicas(e.sa.Replicas, o.Servers, &e.sa.NextReplica)
	if len(e.sa.Replicas) == 1 {
		e.sa.LogConfig = slices.Clone(o.Config) // no group log: nothing replays from it
	}
	e.clearExcluded()
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev}
}

// moveStream applies a MoveStream: an UpdateStream that records the
// move's origin, refused while another is recorded.
func (s *State) moveStream(o *MoveStream) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Move != nil && e.sa.Move.Scale {
		return fail(jserr.StreamReconfigureInProgress)
	}
	if e.sa.Move != nil {
		return fail(jserr.StreamMoveInProgress)
	}
	origin := &MoveOrigin{Created: o.Created, Replicas: slices.Clone(e.sa.Replicas), Placement: slices.Clone(o.OriginPlacement)}
	res := s.updateStream(&UpdateStream{Account: o.Account, Name: o.Name, Config: o.Config, Servers: o.Servers})
	if res.Err == nil {
		e.sa.Move = origin
		sa := e.sa.clone()
		res.Stream = &sa
	}
	return res
}

// scaleStream applies a ScaleStream: an UpdateStream that records the
// scale's origin, or keeps a recorded scale's, refused while a move is
// recorded; a scale down to one replica ends the record.
func (s *State) scaleStream(o *ScaleStream) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Move != nil && !e.sa.Move.Scale {
		return fail(jserr.StreamMoveInProgress)
	}
	origin := &MoveOrigin{Created: o.Created, Replicas: slices.Clone(e.sa.Replicas), Placement: slices.Clone(o.OriginPlacement), Scale: true}
	if e.sa.Move != nil {
		origin = e.sa.Move.clone()
		origin.Cancelled = false
	}
	res := s.updateStream(&UpdateStream{Account: o.Account, Name: o.Name, Config: o.Config, Servers: o.Servers})
	if res.Err == nil {
		e.sa.Move = origin
		if len(e.sa.Replicas) < 2 {
			// Down to one replica: no group to converge, no record.
			e.sa.Move = nil
		}
		sa := e.sa.clone()
		res.Stream = &sa
	}
	return res
}

// cancelMove applies a CancelMove: the stream goes back to its origin
// servers, the record stays, cancelled.
func (s *State) cancelMove(o *CancelMove) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Move == nil || e.sa.Move.Created != o.Created {
		return fail(jserr.StreamReconfigureNotInProgress)
	}
	f, _ := parseStream(o.Config)
	if s.overlaps(o.Account, o.Name, f.Subjects) {
		return fail(jserr.StreamSubjectOverlap)
	}
	var fresh []raftnode.ServerID // origin servers that get a new replica
	for _, r := range e.sa.Move.Replicas {
		if _, ok := On(e.sa.Replicas, r.Server); !ok && !slices.Contains(o.Members, r.ID) {
			fresh = append(fresh, r.Server)
		}
	}
	if !s.members(fresh, nil) {
		return noPeers()
	}
	prev := e.sa.clone()
	out := make([]Replica, 0, len(e.sa.Move.Replicas))
	for _, r := range e.sa.Move.Replicas {
		if cur, ok := On(e.sa.Replicas, r.Server); ok {
			out = append(out, cur)
		} else if slices.Contains(o.Members, r.ID) {
			out = append(out, r)
		} else {
			out = append(out, Replica{ID: e.sa.NextReplica, Server: r.Server, Incarnation: s.servers[r.Server].Incarnation})
			e.sa.NextReplica++
		}
	}
	e.sa.Config = slices.Clone(o.Config)
	e.subjects = f.Subjects
	e.sa.Replicas = out
	e.sa.Move.Cancelled = true
	e.clearExcluded()
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev}
}

// endMove applies an EndMove: the record goes once the stream runs on
// the servers the report names, which must be its assigned ones.
func (s *State) endMove(o *EndMove) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Move == nil || e.sa.Move.Created != o.Created || !sameServers(Servers(e.sa.Replicas), o.Servers) {
		return fail(jserr.StreamReconfigureNotInProgress)
	}
	prev := e.sa.clone()
	e.sa.Move = nil
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev}
}

// sameServers reports whether a and b name the same servers, in any
// order (each names a server at most once).
func sameServers(a, b []raftnode.ServerID) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s raftnode.ServerID) bool { return !slices.Contains(b, s) })
}

func (s *State) moveReplica(o *MoveReplica) Result {
	e := s.stream(o.Account, o.Stream)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	i := slices.IndexFunc(e.sa.Replicas, func(r Replica) bool { return r.ID == o.Replica })
	if i < 0 {
		return fail(jserr.ClusterPeerNotMember)
	}
	if r, ok := On(e.sa.Replicas, o.To); ok && r.ID != o.Replica {
		return noPeers()
	}
	if sv := s.servers[o.To]; sv == nil || sv.Removed {
		return noPeers()
	}
	prev := e.sa.clone()
	e.sa.Replicas[i] = Replica{ID: e.sa.NextReplica, Server: o.To, Incarnation: s.servers[o.To].Incarnation}
	e.sa.NextReplica++
	e.clearExcluded()
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev}
}

func (s *State) renameReplicas(o *RenameReplicas) Result {
	from, to := s.servers[o.From], s.servers[o.To]
	if from == nil || to == nil || !from.Removed || to.Removed || from.Incarnation != to.Incarnation {
		return fail(jserr.ClusterServerNotMember)
	}
	rename := func(rs []Replica) {
		if _, ok := On(rs, o.To); ok {
			return
		}
		for i := range rs {
			if rs[i].Server == o.From && rs[i].Incarnation == to.Incarnation {
				rs[i].Server = o.To
			}
		}
	}
	for _, e := range s.sortedStreams() {
		rename(e.sa.Replicas)
		if e.sa.Move != nil {
			rename(e.sa.Move.Replicas)
		}
		for _, ca := range e.consumers {
			rename(ca.Replicas)
		}
	}
	return Result{}
}

func (s *State) settleStream(o *SettleStream) Result {
	e := s.stream(o.Account, o.Stream)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Group != o.Group || len(e.sa.Replicas) != 1 || e.sa.Replicas[0].ID != o.Replica || !e.sa.Unsettled() {
		return fail(jserr.ClusterPeerNotMember)
	}
	prev := e.sa.clone()
	r := e.sa.Replicas[0]
	if sv := s.servers[r.Server]; sv != nil {
		r.Incarnation = sv.Incarnation
	}
	r.ID = 1
	e.sa.Group = s.allocGroup()
	e.sa.Replicas = []Replica{r}
	e.sa.NextReplica = 2
	e.sa.LogConfig = slices.Clone(e.sa.Config)
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev}
}

func (s *State) resetStream(o *ResetStream) Result {
	e := s.stream(o.Account, o.Stream)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if e.sa.Group != o.Group || len(e.sa.Replicas) < 2 || !memoryStream(e.sa.Config, len(e.sa.Replicas)) {
		return fail(jserr.ClusterPeerNotMember)
	}
	prev := e.sa.clone()
	e.sa.Group = s.allocGroup()
	e.sa.Replicas = s.renumber(e.sa.Replicas)
	e.sa.NextReplica = raftnode.ReplicaID(len(e.sa.Replicas) + 1)
	e.sa.LogConfig = slices.Clone(e.sa.Config)
	for _, name := range slices.Sorted(maps.Keys(e.consumers)) { // allocation order: no map order in apply
		ca := e.consumers[name]
		ca.Group = s.allocGroup()
		ca.Replicas = s.renumber(ca.Replicas)
		ca.NextReplica = raftnode.ReplicaID(len(ca.Replicas) + 1)
		ca.Initial = len(ca.Replicas) // every one starts the new group
	}
	sa := e.sa.clone()
	return Result{Stream: &sa, PrevStream: &prev, Consumers: e.sortedConsumers()}
}

// renumber returns replicas on the servers of rs, in order, with IDs 1
// to len(rs), bound to each server's incarnation in the catalogue (the
// one they had for a server no longer in it).
func (s *State) renumber(rs []Replica) []Replica {
	out := make([]Replica, len(rs))
	for i, r := range rs {
		out[i] = Replica{ID: raftnode.ReplicaID(i + 1), Server: r.Server, Incarnation: r.Incarnation}
		if sv := s.servers[r.Server]; sv != nil {
			out[i].Incarnation = sv.Incarnation
		}
	}
	return out
}

// memoryStream reports whether a stream config (the API's StreamConfig
// JSON) stores in memory with n replicas: the new group's replicas
// bootstrap with IDs 1 to its num_replicas as voters.
func memoryStream(config []byte, n int) bool {
	var f struct {
		Storage  string `json:"storage"`
		Replicas int    `json:"num_replicas"`
	}
	return json.Unmarshal(config, &f) == nil && f.Storage == "memory" && f.Replicas == n
}

// consumerOf returns consumer name of stream stream in account and its
// stream's entry, or, when either is missing, the failure to return
// (10059 stream not found, 10014 consumer not found) and false.
func (s *State) consumerOf(account, stream, name string) (*streamEntry, *ConsumerAssignment, Result, bool) {
	e := s.stream(account, stream)
	if e == nil {
		return nil, nil, fail(jserr.StreamNotFound), false
	}
	ca := e.consumers[name]
	if ca == nil {
		return nil, nil, fail(jserr.ConsumerNotFound), false
	}
	return e, ca, Result{}, true
}

func (s *State) settleConsumer(o *SettleConsumer) Result {
	e, ca, res, ok := s.consumerOf(o.Account, o.Stream, o.Name)
	if !ok {
		return res
	}
	if ca.Group != o.Group || len(ca.Replicas) != 1 || ca.Replicas[0].ID != o.Replica || !ca.Unsettled() {
		return fail(jserr.ClusterPeerNotMember)
	}
	prev := ca.clone()
	r := ca.Replicas[0]
	if sv := s.servers[r.Server]; sv != nil {
		r.Incarnation = sv.Incarnation
	}
	r.ID = 1
	ca.Group = s.allocGroup()
	ca.Replicas = []Replica{r}
	ca.NextReplica = 2
	ca.Initial = 1
	sa, c := e.sa.clone(), ca.clone()
	return Result{Stream: &sa, Consumer: &c, PrevConsumer: &prev}
}

func (s *State) moveConsumer(o *MoveConsumer) Result {
	e, ca, res, ok := s.consumerOf(o.Account, o.Stream, o.Name)
	if !ok {
		return res
	}
	i := slices.IndexFunc(ca.Replicas, func(r Replica) bool { return r.ID == o.Replica })
	if i < 0 {
		return fail(jserr.ClusterPeerNotMember)
	}
	if r, ok := On(ca.Replicas, o.To); ok && r.ID != o.Replica {
		return noPeers()
	}
	if _, ok := On(e.sa.Replicas, o.To); !ok {
		return noPeers()
	}
	if sv := s.servers[o.To]; sv == nil || sv.Removed {
		return noPeers()
	}
	prev := ca.clone()
	ca.Replicas[i] = Replica{ID: ca.NextReplica, Server: o.To, Incarnation: s.servers[o.To].Incarnation}
	ca.NextReplica++
	sa, c := e.sa.clone(), ca.clone()
	return Result{Stream: &sa, Consumer: &c, PrevConsumer: &prev}
}

func (s *State) removeStream(o *RemoveStream) Result {
	e := s.stream(o.Account, o.Name)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	delete(s.accounts[o.Account], o.Name)
	if len(s.accounts[o.Account]) == 0 {
		delete(s.accounts, o.Account)
	}
	sa := e.sa.clone()
	return Result{Stream: &sa, Consumers: e.sortedConsumers()}
}

func (s *State) assignConsumer(o *AssignConsumer) Result {
	e := s.stream(o.Account, o.Stream)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	sa := e.sa.clone()
	ca := e.consumers[o.Name]
	switch {
	case ca == nil && o.Action == Update:
		return fail(jserr.ConsumerDoesNotExist)
	case ca != nil && bytes.Equal(ca.Config, o.Config) && (o.Action == Create || len(o.Servers) == len(ca.Replicas)):
		c := ca.clone()
		return Result{Existed: true, Stream: &sa, Consumer: &c}
	case ca != nil && o.Action == Create:
		return fail(jserr.ConsumerAlreadyExists)
	}
	var have []Replica
	if ca != nil {
		have = ca.Replicas
	}
	servers := o.Servers
	if ca != nil && len(servers) == len(have) {
		// Not a scale: o.Servers differ only when the proposer placed
		// the consumer before an earlier create of it applied (two
		// creates racing, a client's retry), and moving it would start
		// its replica afresh elsewhere, its delivery and ack state left
		// behind. It keeps its servers.
		servers = Servers(have)
	}
	// A new replica goes only on a member server holding the stream.
	for _, srv := range servers {
		if _, kept := On(have, srv); kept {
			continue
		}
		if _, ok := On(e.sa.Replicas, srv); !ok || !s.members([]raftnode.ServerID{srv}, nil) {
			return fail(jserr.InsufficientResources)
		}
	}
	res := Result{Stream: &sa}
	if ca == nil {
		ca = &ConsumerAssignment{Account: o.Account, Stream: o.Stream, Name: o.Name, Created: o.Created, Group: s.allocGroup(), NextReplica: 1,
			Initial: len(servers)}
		e.consumers[o.Name] = ca
	} else {
		prev := ca.clone()
		res.PrevConsumer = &prev
	}
	ca.Config = slices.Clone(o.Config)
	ca.Replicas = s.replicas(ca.Replicas, servers, &ca.NextReplica)
	c := ca.clone()
	res.Consumer = &c
	return res
}

func (s *State) removeConsumer(o *RemoveConsumer) Result {
	e, ca, res, ok := s.consumerOf(o.Account, o.Stream, o.Name)
	if !ok {
		return res
	}
	delete(e.consumers, o.Name)
	sa, c := e.sa.clone(), ca.clone()
	return Result{Stream: &sa, Consumer: &c}
}

// allocGroup returns the next group ID; IDs are never reused.
func (s *State) allocGroup() raftnode.GroupID {
	g := s.nextGroup
	s.nextGroup++
	return g
}

// members reports whether every server is in the catalogue and not
// removed, but for those already holding one of have (they stay).
func (s *State) members(servers []raftnode.ServerID, have []Replica) bool {
	for _, srv := range servers {
		if _, kept := On(have, srv); kept {
			continue
		}
		if sv := s.servers[srv]; sv == nil || sv.Removed {
			return false
		}
	}
	return true
}

// replicas returns the replicas for servers, in their order: a server
// of have keeps its replica; another gets the ID *next (then
// incremented), bound to its incarnation in the catalogue.
func (s *State) replicas(have []Replica, servers []raftnode.ServerID, next *raftnode.ReplicaID) []Replica {
	out := make([]Replica, 0, len(servers))
	for _, srv := range servers {
		if r, ok := On(have, srv); ok {
			out = append(out, r)
			continue
		}
		out = append(out, Replica{ID: *next, Server: srv, Incarnation: s.servers[srv].Incarnation})
		*next++
	}
	return out
}

// overlaps reports whether subjects overlap a subject of another stream
// of the account (nats-server's subjectsOverlap). The answer does not
// depend on the order the streams are visited in.
func (s *State) overlaps(account, name string, subjects []string) bool {
	if len(subjects) == 0 {
		return false
	}
	var x subject.OverlapIndex
	for _, p := range subjects {
		x.Add(p)
	}
	for other, e := range s.accounts[account] {
		if other == name {
			continue
		}
		for _, p := range e.subjects {
			if x.Overlaps(p) {
				return true
			}
		}
	}
	return false
}

// excludeServer applies an ExcludeServer: the server joins the stream's
// Excluded set (sorted, distinct).
func (s *State) excludeServer(o *ExcludeServer) Result {
	e := s.stream(o.Account, o.Stream)
	if e == nil {
		return fail(jserr.StreamNotFound)
	}
	if s.servers[o.Server] == nil {
		return fail(jserr.ClusterServerNotMember)
	}
	if i, found := slices.BinarySearch(e.sa.Excluded, o.Server); !found {
		e.sa.Excluded = slices.Insert(e.sa.Excluded, i, o.Server)
	}
	sa := e.sa.clone()
	return Result{Stream: &sa}
}

// clearExcluded empties stream e's Excluded set once it holds at least
// its config's num_replicas replicas, none of them on an excluded
// server: the evacuation that excluded them is over (ExcludeServer).
func (e *streamEntry) clearExcluded() {
	if len(e.sa.Excluded) == 0 {
		return
	}
	for _, r := range e.sa.Replicas {
		if slices.Contains(e.sa.Excluded, r.Server) {
			return
		}
	}
	var cfg struct {
		Replicas int `json:"num_replicas"`
	}
	if json.Unmarshal(e.sa.Config, &cfg) == nil && len(e.sa.Replicas) >= max(cfg.Replicas, 1) {
		e.sa.Excluded = nil
	}
}
