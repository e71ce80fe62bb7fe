package meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// streamJSON is a stream config as the API would hold it (the fields
// apply reads, and one it does not).
func streamJSON(name string, subjects ...string) []byte {
	b, err := json.Marshal(map[string]any{"name": name, "subjects": subjects, "num_replicas": 3, "storage": "file"})
	if err != nil {
		panic(err)
	}
	return b
}

func consumerJSON(name string, extra string) []byte {
	return fmt.Appendf(nil, `{"durable_name":%q,"ack_policy":"explicit"%s}`, name, extra)
}

func servers(names ...string) []raftnode.ServerID {
	out := make([]raftnode.ServerID, len(names))
	for i, n := range names {
		out[i] = raftnode.ServerID(n)
	}
	return out
}

// sampleOps has an operation of every kind, with corner cases: negative
// and large times, one and many servers, tags, an incarnation.
func sampleOps() []Op {
	return []Op{
		&AssignStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "orders.>"), Created: 1_800_000_000_123_456_789, Servers: servers("s1", "s2", "s3")},
		&AssignStream{Account: "$G", Name: "M", Config: []byte(`{"name":"M","mirror":{"name":"ORDERS"}}`), Created: -5, Servers: servers("s2")},
		&UpdateStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "orders.>", "returns.>"), Servers: servers("s3", "s4", "s5", "s1", "s2")},
		&RemoveStream{Account: "A", Name: "ORDERS"},
		&AssignConsumer{Account: "A", Stream: "ORDERS", Name: "C", Action: Create, Config: consumerJSON("C", ""), Created: 7, Servers: servers("s1")},
		&AssignConsumer{Account: "A", Stream: "ORDERS", Name: "eph", Action: CreateOrUpdate, Config: []byte(`{}`), Servers: servers("s1", "s2", "s3")},
		&AssignConsumer{Account: "A", Stream: "ORDERS", Name: "C", Action: Update, Config: consumerJSON("C", `,"max_deliver":5`), Created: 1 << 62, Servers: servers("s2", "s3", "s1")},
		&RemoveConsumer{Account: "A", Stream: "ORDERS", Name: "C"},
		&AddServer{Name: "s1", Cluster: "C1", Tags: []string{"az:1", "ssd"}, Incarnation: raftnode.Incarnation{1, 2, 3, 15: 16}},
		&AddServer{Name: "s9", Cluster: "C2"},
		&RemoveServer{Name: "s1"},
		&MoveReplica{Account: "A", Stream: "ORDERS", Replica: 300, To: "s4"},
		&SettleStream{Account: "A", Stream: "ORDERS", Group: 1 << 40, Replica: 3},
		&ResetStream{Account: "A", Stream: "ORDERS", Group: 1 << 50},
		&SettleConsumer{Account: "A", Stream: "ORDERS", Name: "C", Group: 1 << 41, Replica: 2},
		&MoveConsumer{Account: "A", Stream: "ORDERS", Name: "C", Replica: 7, To: "s3"},
		&MoveStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "orders.>"), Servers: servers("s4", "s5"), Created: -1, OriginPlacement: []byte(`{"tags":["az:1"]}`)},
		&MoveStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS"), Servers: servers("s1"), Created: 1 << 60},
		&ScaleStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS", "orders.>"), Servers: servers("s1", "s2", "s3"), Created: -1, OriginPlacement: []byte(`{"tags":["az:1"]}`)},
		&ScaleStream{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS"), Servers: servers("s1"), Created: 1 << 60},
		&CancelMove{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS"), Created: 1 << 60, Members: []raftnode.ReplicaID{1, 300, 2}},
		&CancelMove{Account: "A", Name: "ORDERS", Config: streamJSON("ORDERS"), Created: 0},
		&EndMove{Account: "A", Name: "ORDERS", Created: 3, Servers: servers("s2", "s1")},
		&RenameReplicas{From: "s3", To: "s3x"},
		&ExcludeServer{Account: "A", Stream: "ORDERS", Server: "s3"},
	}
}

// Every operation decodes to itself, and an encoding is a pure function
// of the operation.
func TestOpRoundTrip(t *testing.T) {
	kinds := map[Kind]bool{}
	for _, op := range sampleOps() {
		b, err := AppendOp(nil, op)
		if err != nil {
			t.Fatalf("%T: %v", op, err)
		}
		got, err := DecodeOp(b)
		if err != nil {
			t.Fatalf("%T: decode: %v", op, err)
		}
		if !reflect.DeepEqual(got, op) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", got, op)
		}
		again, _ := AppendOp([]byte("prefix"), got)
		if !bytes.Equal(again[len("prefix"):], b) {
			t.Fatalf("%T: encodings differ", op)
		}
		kinds[op.Kind()] = true
	}
	for k := KindAssignStream; k <= KindScaleStream; k++ {
		if !kinds[k] {
			t.Errorf("kind %d has no round-trip sample", k)
		}
	}
}

// The decoder refuses every truncation, trailing bytes, an unknown kind or
// version; the decoded operation does not alias the input.
func TestDecodeOpRefuses(t *testing.T) {
	for _, op := range sampleOps() {
		b, _ := AppendOp(nil, op)
		for n := range len(b) {
			if _, err := DecodeOp(b[:n]); !errors.Is(err, ErrBadOp) {
				t.Fatalf("%T truncated to %d of %d bytes: %v", op, n, len(b), err)
			}
		}
		if _, err := DecodeOp(append(bytes.Clone(b), 0)); !errors.Is(err, ErrBadOp) {
			t.Fatalf("%T with a trailing byte: %v", op, err)
		}
		v := bytes.Clone(b)
		v[1] = 2
		if _, err := DecodeOp(v); !errors.Is(err, ErrBadOp) {
			t.Fatalf("%T version 2: %v", op, err)
		}
	}
	for _, k := range []byte{0, 8, 255} {
		if _, err := DecodeOp([]byte{k, 1, 0, 0}); !errors.Is(err, ErrBadOp) {
			t.Fatalf("kind %d: %v", k, err)
		}
	}
	b, _ := AppendOp(nil, sampleOps()[0])
	op, _ := DecodeOp(b)
	clear(b)
	if a := op.(*AssignStream); a.Name != "ORDERS" || !bytes.Contains(a.Config, []byte(`"name":"ORDERS"`)) {
		t.Fatalf("the decoded operation aliases its input: %+v", a)
	}
}

// AppendOp refuses what the decoder would refuse, so an invalid
// operation never enters the log; the same bytes crafted by hand are
// refused by DecodeOp.
func TestOpChecks(t *testing.T) {
	cfg := streamJSON("S")
	bad := map[string]Op{
		"empty account":           &AssignStream{Name: "S", Config: cfg, Servers: servers("s1")},
		"no servers":              &AssignStream{Account: "A", Name: "S", Config: cfg},
		"17 servers":              &UpdateStream{Account: "A", Name: "S", Config: cfg, Servers: servers("1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17")},
		"repeated server":         &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1", "s2", "s1")},
		"empty server":            &AssignStream{Account: "A", Name: "S", Config: cfg, Servers: servers("")},
		"config names another":    &AssignStream{Account: "A", Name: "T", Config: cfg, Servers: servers("s1")},
		"config not an object":    &UpdateStream{Account: "A", Name: "S", Config: []byte(`["S"]`), Servers: servers("s1")},
		"config null":             &UpdateStream{Account: "A", Name: "S", Config: []byte(`null`), Servers: servers("s1")},
		"config subjects wrong":   &UpdateStream{Account: "A", Name: "S", Config: []byte(`{"name":"S","subjects":"x"}`), Servers: servers("s1")},
		"config invalid":          &AssignStream{Account: "A", Name: "S", Config: []byte(`{"name":"S"`), Servers: servers("s1")},
		"consumer config invalid": &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: []byte(`{"x":}`), Servers: servers("s1")},
		"consumer config array":   &AssignConsumer{Account: "A", Stream: "S", Name: "C", Config: []byte(`[]`), Servers: servers("s1")},
		"consumer action 3":       &AssignConsumer{Account: "A", Stream: "S", Name: "C", Action: 3, Config: []byte(`{}`), Servers: servers("s1")},
		"consumer without name":   &RemoveConsumer{Account: "A", Stream: "S"},
		"server without name":     &AddServer{Cluster: "C1"},
		"remove of no server":     &RemoveServer{},
		"move of replica 0":       &MoveReplica{Account: "A", Stream: "S", To: "s1"},
		"move to no server":       &MoveReplica{Account: "A", Stream: "S", Replica: 1},
		"reset of group 0":        &ResetStream{Account: "A", Stream: "S"},
		"reset of no stream":      &ResetStream{Account: "A", Group: 2},
		"origin placement array":  &MoveStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1"), OriginPlacement: []byte(`["az:1"]`)},
		"move to no servers":      &MoveStream{Account: "A", Name: "S", Config: cfg},
		"scale to no servers":     &ScaleStream{Account: "A", Name: "S", Config: cfg},
		"scale origin array":      &ScaleStream{Account: "A", Name: "S", Config: cfg, Servers: servers("s1"), OriginPlacement: []byte(`["az:1"]`)},
		"cancel config of T":      &CancelMove{Account: "A", Name: "T", Config: cfg},
		"cancel member 0":         &CancelMove{Account: "A", Name: "S", Config: cfg, Members: []raftnode.ReplicaID{1, 0}},
		"end move of no servers":  &EndMove{Account: "A", Name: "S"},
		"rename from no server":   &RenameReplicas{To: "s1"},
		"rename to itself":        &RenameReplicas{From: "s1", To: "s1"},
		"exclude no server":       &ExcludeServer{Account: "A", Stream: "S"},
		"exclude of no stream":    &ExcludeServer{Account: "A", Server: "s1"},
		"nil":                     nil,
	}
	for name, op := range bad {
		if op == nil {
			if _, err := AppendOp(nil, (*unknownOp)(nil)); !errors.Is(err, ErrBadOp) {
				t.Errorf("an unknown type: %v", err)
			}
			continue
		}
		if _, err := AppendOp(nil, op); !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: AppendOp: %v", name, err)
		}
		if _, err := DecodeOp(encodeUnchecked(op)); !errors.Is(err, ErrBadOp) {
			t.Errorf("%s: DecodeOp: %v", name, err)
		}
	}
}

type unknownOp struct{}

func (*unknownOp) Kind() Kind { return 200 }

// encodeUnchecked is AppendOp without its checks: the bytes a faulty or
// malicious proposer could put in the log.
func encodeUnchecked(op Op) []byte {
	var b []byte
	switch o := op.(type) {
	case *AssignStream:
		b = []byte{byte(KindAssignStream), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = appendBytes(b, o.Config)
		b = binary.AppendVarint(b, o.Created)
		b = appendServers(b, o.Servers)
	case *UpdateStream:
		b = []byte{byte(KindUpdateStream), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = appendBytes(b, o.Config)
		b = appendServers(b, o.Servers)
	case *AssignConsumer:
		b = []byte{byte(KindAssignConsumer), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Stream)
		b = appendString(b, o.Name)
		b = append(b, byte(o.Action))
		b = appendBytes(b, o.Config)
		b = binary.AppendVarint(b, o.Created)
		b = appendServers(b, o.Servers)
	case *RemoveConsumer:
		b = []byte{byte(KindRemoveConsumer), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Stream)
		b = appendString(b, o.Name)
	case *AddServer:
		b = []byte{byte(KindAddServer), opVersion}
		b = appendString(b, string(o.Name))
		b = appendString(b, o.Cluster)
		b = appendStrings(b, o.Tags)
		b = append(b, o.Incarnation[:]...)
	case *RemoveServer:
		b = []byte{byte(KindRemoveServer), opVersion}
		b = appendString(b, string(o.Name))
	case *MoveReplica:
		b = []byte{byte(KindMoveReplica), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Stream)
		b = binary.AppendUvarint(b, uint64(o.Replica))
		b = appendString(b, string(o.To))
	case *MoveStream:
		b = []byte{byte(KindMoveStream), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = appendBytes(b, o.Config)
		b = appendServers(b, o.Servers)
		b = binary.AppendVarint(b, o.Created)
		b = appendBytes(b, o.OriginPlacement)
	case *ScaleStream:
		b = []byte{byte(KindScaleStream), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = appendBytes(b, o.Config)
		b = appendServers(b, o.Servers)
		b = binary.AppendVarint(b, o.Created)
		b = appendBytes(b, o.OriginPlacement)
	case *CancelMove:
		b = []byte{byte(KindCancelMove), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = appendBytes(b, o.Config)
		b = binary.AppendVarint(b, o.Created)
		b = binary.AppendUvarint(b, uint64(len(o.Members)))
		for _, m := range o.Members {
			b = binary.AppendUvarint(b, uint64(m))
		}
	case *EndMove:
		b = []byte{byte(KindEndMove), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Name)
		b = binary.AppendVarint(b, o.Created)
		b = appendServers(b, o.Servers)
	case *RenameReplicas:
		b = []byte{byte(KindRenameReplicas), opVersion}
		b = appendString(b, string(o.From))
		b = appendString(b, string(o.To))
	case *ExcludeServer:
		b = []byte{byte(KindExcludeServer), opVersion}
		b = appendString(b, o.Account)
		b = appendString(b, o.Stream)
		b = appendString(b, string(o.Server))
	}
	return b
}

// FuzzDecodeOp: the decoder never panics; what it accepts encodes again
// and decodes to the same operation, and applies to a state without
// panicking.
func FuzzDecodeOp(f *testing.F) {
	for _, op := range sampleOps() {
		b, _ := AppendOp(nil, op)
		f.Add(b)
	}
	f.Add([]byte{byte(KindAssignStream), 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := DecodeOp(b)
		if err != nil {
			if !errors.Is(err, ErrBadOp) {
				t.Fatalf("error not wrapping ErrBadOp: %v", err)
			}
			return
		}
		again, err := AppendOp(nil, op)
		if err != nil {
			t.Fatalf("decoded %#v does not encode: %v", op, err)
		}
		op2, err := DecodeOp(again)
		if err != nil || !reflect.DeepEqual(op, op2) {
			t.Fatalf("re-decode: %#v, %v; want %#v", op2, err, op)
		}
		st := testState()
		st.Apply(op)
		if _, err := DecodeSnapshot(st.AppendSnapshot(nil)); err != nil {
			t.Fatalf("after %#v the snapshot does not decode: %v", op, err)
		}
	})
}
