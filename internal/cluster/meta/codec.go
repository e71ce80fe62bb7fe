package meta

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnmq/cairn/internal/raftnode"
)

// opVersion is the version byte of every kind today.
const opVersion = 1

// MaxServers bounds the servers one operation names: a sanity bound on
// decoding, above nats-server's 5 replicas (StreamMaxReplicas) so that a
// stream moving between peer sets can name both.
const MaxServers = 16

// ErrBadOp is returned (wrapped) by DecodeOp for bytes that are not an
// encoded operation, and by AppendOp for an operation that could not be
// decoded again (package comment, "Operation encoding").
var ErrBadOp = errors.New("meta: malformed operation")

// AppendOp appends op's byte form (package comment) to dst. It refuses,
// with an error wrapping ErrBadOp, what DecodeOp would refuse: empty
// names, no servers or more than MaxServers, repeated servers, a stream
// config that is not a JSON object naming the stream, a consumer config
// that is not a JSON object, an unknown action, an unknown type.
func AppendOp(dst []byte, op Op) ([]byte, error) {
	if err := check(op); err != nil {
		return nil, err
	}
	dst = append(dst, byte(op.Kind()), opVersion)
	switch o := op.(type) {
	case *AssignStream:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Name)
		dst = appendBytes(dst, o.Config)
		dst = binary.AppendVarint(dst, o.Created)
		dst = appendServers(dst, o.Servers)
	case *UpdateStream:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Name)
		dst = appendBytes(dst, o.Config)
		dst = appendServers(dst, o.Servers)
	case *RemoveStream:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Name)
	case *AssignConsumer:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = appendString(dst, o.Name)
		dst = append(dst, byte(o.Action))
		dst = appendBytes(dst, o.Config)
		dst = binary.AppendVarint(dst, o.Created)
		dst = appendServers(dst, o.Servers)
	case *RemoveConsumer:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = appendString(dst, o.Name)
	case *AddServer:
		dst = appendString(dst, string(o.Name))
		dst = appendString(dst, o.Cluster)
		dst = appendStrings(dst, o.Tags)
		dst = append(dst, o.Incarnation[:]...)
	case *RemoveServer:
		dst = appendString(dst, string(o.Name))
	case *MoveReplica:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = binary.AppendUvarint(dst, uint64(o.Replica))
		dst = appendString(dst, string(o.To))
	case *SettleStream:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = binary.AppendUvarint(dst, uint64(o.Group))
		dst = binary.AppendUvarint(dst, uint64(o.Replica))
	case *ResetStream:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = binary.AppendUvarint(dst, uint64(o.Group))
	case *SettleConsumer:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = appendString(dst, o.Name)
		dst = binary.AppendUvarint(dst, uint64(o.Group))
		dst = binary.AppendUvarint(dst, uint64(o.Replica))
	case *MoveConsumer:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = appendString(dst, o.Name)
		dst = binary.AppendUvarint(dst, uint64(o.Replica))
		dst = appendString(dst, string(o.To))
	case *MoveStream:
		dst = appendMoveStream(dst, o)
	case *ScaleStream:
		dst = appendMoveStream(dst, (*MoveStream)(o))
	case *CancelMove:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Name)
		dst = appendBytes(dst, o.Config)
		dst = binary.AppendVarint(dst, o.Created)
		dst = binary.AppendUvarint(dst, uint64(len(o.Members)))
		for _, m := range o.Members {
			dst = binary.AppendUvarint(dst, uint64(m))
		}
	case *EndMove:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Name)
		dst = binary.AppendVarint(dst, o.Created)
		dst = appendServers(dst, o.Servers)
	case *RenameReplicas:
		dst = appendString(dst, string(o.From))
		dst = appendString(dst, string(o.To))
	case *ExcludeServer:
		dst = appendString(dst, o.Account)
		dst = appendString(dst, o.Stream)
		dst = appendString(dst, string(o.Server))
	}
	return dst, nil
}

// DecodeOp reads an operation AppendOp wrote. The operation does not
// alias b. Anything else gives an error wrapping ErrBadOp.
func DecodeOp(b []byte) (Op, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadOp, len(b))
	}
	kind, version := Kind(b[0]), b[1]
	if version != opVersion {
		return nil, fmt.Errorf("%w: kind %d version %d", ErrBadOp, kind, version)
	}
	d := &decoder{b: b[2:]}
	var op Op
	switch kind {
	case KindAssignStream:
		op = &AssignStream{Account: d.string(), Name: d.string(), Config: d.bytes(), Created: d.varint(), Servers: d.servers()}
	case KindUpdateStream:
		op = &UpdateStream{Account: d.string(), Name: d.string(), Config: d.bytes(), Servers: d.servers()}
	case KindRemoveStream:
		op = &RemoveStream{Account: d.string(), Name: d.string()}
	case KindAssignConsumer:
		op = &AssignConsumer{Account: d.string(), Stream: d.string(), Name: d.string(), Action: ConsumerAction(d.byte()),
			Config: d.bytes(), Created: d.varint(), Servers: d.servers()}
	case KindRemoveConsumer:
		op = &RemoveConsumer{Account: d.string(), Stream: d.string(), Name: d.string()}
	case KindAddServer:
		op = &AddServer{Name: raftnode.ServerID(d.string()), Cluster: d.string(), Tags: d.strings(), Incarnation: d.incarnation()}
	case KindRemoveServer:
		op = &RemoveServer{Name: raftnode.ServerID(d.string())}
	case KindMoveReplica:
		op = &MoveReplica{Account: d.string(), Stream: d.string(), Replica: raftnode.ReplicaID(d.uvarint()), To: raftnode.ServerID(d.string())}
	case KindSettleStream:
		op = &SettleStream{Account: d.string(), Stream: d.string(), Group: raftnode.GroupID(d.uvarint()), Replica: raftnode.ReplicaID(d.uvarint())}
	case KindResetStream:
		op = &ResetStream{Account: d.string(), Stream: d.string(), Group: raftnode.GroupID(d.uvarint())}
	case KindSettleConsumer:
		op = &SettleConsumer{Account: d.string(), Stream: d.string(), Name: d.string(), Group: raftnode.GroupID(d.uvarint()), Replica: raftnode.ReplicaID(d.uvarint())}
	case KindMoveConsumer:
		op = &MoveConsumer{Account: d.string(), Stream: d.string(), Name: d.string(), Replica: raftnode.ReplicaID(d.uvarint()), To: raftnode.ServerID(d.string())}
	case KindMoveStream:
		op = d.moveStream()
	case KindScaleStream:
		op = (*ScaleStream)(d.moveStream())
	case KindCancelMove:
		op = &CancelMove{Account: d.string(), Name: d.string(), Config: d.bytes(), Created: d.varint(), Members: d.replicaIDs()}
	case KindEndMove:
		op = &EndMove{Account: d.string(), Name: d.string(), Created: d.varint(), Servers: d.servers()}
	case KindRenameReplicas:
		op = &RenameReplicas{From: raftnode.ServerID(d.string()), To: raftnode.ServerID(d.string())}
	case KindExcludeServer:
		op = &ExcludeServer{Account: d.string(), Stream: d.string(), Server: raftnode.ServerID(d.string())}
	default:
		return nil, fmt.Errorf("%w: unknown kind %d", ErrBadOp, kind)
	}
	if d.failed || len(d.b) > 0 {
		return nil, fmt.Errorf("%w: kind %d: truncated, or trailing bytes", ErrBadOp, kind)
	}
	if err := check(op); err != nil {
		return nil, err
	}
	return op, nil
}

// check refuses the operations the encoding does not allow.
func check(op Op) error {
	var err error
	switch o := op.(type) {
	case *AssignStream:
		err = errors.Join(checkNames(o.Account, o.Name), streamConfig(o.Config, o.Name), checkServers(o.Servers))
	case *UpdateStream:
		err = errors.Join(checkNames(o.Account, o.Name), streamConfig(o.Config, o.Name), checkServers(o.Servers))
	case *RemoveStream:
		err = checkNames(o.Account, o.Name)
	case *AssignConsumer:
		err = errors.Join(checkNames(o.Account, o.Stream, o.Name), consumerConfig(o.Config), checkServers(o.Servers))
		if o.Action > Create {
			err = errors.Join(err, fmt.Errorf("action %d", o.Action))
		}
	case *RemoveConsumer:
		err = checkNames(o.Account, o.Stream, o.Name)
	case *AddServer:
		err = checkNames(string(o.Name))
	case *RemoveServer:
		err = checkNames(string(o.Name))
	case *MoveReplica:
		err = checkNames(o.Account, o.Stream, string(o.To))
		if o.Replica == 0 {
			err = errors.Join(err, errors.New("replica 0"))
		}
	case *SettleStream:
		err = checkNames(o.Account, o.Stream)
		if o.Group == 0 || o.Replica == 0 {
			err = errors.Join(err, errors.New("group or replica 0"))
		}
	case *ResetStream:
		err = checkNames(o.Account, o.Stream)
		if o.Group == 0 {
			err = errors.Join(err, errors.New("group 0"))
		}
	case *MoveConsumer:
		err = checkNames(o.Account, o.Stream, o.Name, string(o.To))
		if o.Replica == 0 {
			err = errors.Join(err, errors.New("replica 0"))
		}
	case *SettleConsumer:
		err = checkNames(o.Account, o.Stream, o.Name)
		if o.Group == 0 || o.Replica == 0 {
			err = errors.Join(err, errors.New("group or replica 0"))
		}
	case *MoveStream:
		err = checkMoveStream(o)
	case *ScaleStream:
		err = checkMoveStream((*MoveStream)(o))
	case *CancelMove:
		err = errors.Join(checkNames(o.Account, o.Name), streamConfig(o.Config, o.Name))
		if slices.Contains(o.Members, 0) {
			err = errors.Join(err, errors.New("member replica 0"))
		}
	case *EndMove:
		err = errors.Join(checkNames(o.Account, o.Name), checkServers(o.Servers))
	case *RenameReplicas:
		err = checkNames(string(o.From), string(o.To))
		if err == nil && o.From == o.To {
			err = errors.New("a server renamed to itself")
		}
	case *ExcludeServer:
		err = checkNames(o.Account, o.Stream, string(o.Server))
	default:
		return fmt.Errorf("%w: an operation of type %T", ErrBadOp, op)
	}
	if err != nil {
		return fmt.Errorf("%w: kind %d: %w", ErrBadOp, op.Kind(), err)
	}
	return nil
}

func checkNames(ns ...string) error {
	for _, n := range ns {
		if n == "" {
			return errors.New("empty name")
		}
	}
	return nil
}

func checkServers(ss []raftnode.ServerID) error {
	if len(ss) == 0 || len(ss) > MaxServers {
		return fmt.Errorf("%d servers", len(ss))
	}
	for i, s := range ss {
		if s == "" {
			return errors.New("empty server name")
		}
		for _, o := range ss[:i] {
			if o == s {
				return fmt.Errorf("server %q named twice", s)
			}
		}
	}
	return nil
}

// streamFields are the fields of a StreamConfig that apply reads.
type streamFields struct {
	Name     string   `json:"name"`
	Subjects []string `json:"subjects"`
}

func parseStream(config []byte) (streamFields, error) {
	var f streamFields
	if !isObject(config) {
		return f, errors.New("stream config is not a JSON object")
	}
	if err := json.Unmarshal(config, &f); err != nil {
		return f, fmt.Errorf("stream config: %w", err)
	}
	return f, nil
}

func streamConfig(config []byte, name string) error {
	f, err := parseStream(config)
	if err == nil && f.Name != name {
		err = fmt.Errorf("stream config names %q, not %q", f.Name, name)
	}
	return err
}

// placementJSON accepts an origin placement: empty (none) or a JSON
// object.
func placementJSON(b []byte) error {
	if len(b) > 0 && !isObject(b) {
		return errors.New("origin placement is not a JSON object")
	}
	return nil
}

func consumerConfig(config []byte) error {
	if !isObject(config) {
		return errors.New("consumer config is not a JSON object")
	}
	return nil
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(b)
}

// appendMoveStream appends the fields of a MoveStream (or a ScaleStream,
// which has its shape) in the order the package comment draws.
func appendMoveStream(dst []byte, o *MoveStream) []byte {
	dst = appendString(dst, o.Account)
	dst = appendString(dst, o.Name)
	dst = appendBytes(dst, o.Config)
	dst = appendServers(dst, o.Servers)
	dst = binary.AppendVarint(dst, o.Created)
	return appendBytes(dst, o.OriginPlacement)
}

// moveStream decodes the fields appendMoveStream appends.
func (d *decoder) moveStream() *MoveStream {
	return &MoveStream{Account: d.string(), Name: d.string(), Config: d.bytes(), Servers: d.servers(), Created: d.varint(), OriginPlacement: d.optBytes()}
}

// checkMoveStream is what AppendOp and the decoder refuse in a
// MoveStream or a ScaleStream.
func checkMoveStream(o *MoveStream) error {
	return errors.Join(checkNames(o.Account, o.Name), streamConfig(o.Config, o.Name), checkServers(o.Servers), placementJSON(o.OriginPlacement))
}
