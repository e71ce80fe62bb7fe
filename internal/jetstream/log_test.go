package jetstream

import (
	"fmt"

	"github.com/cairnmq/cairn/internal/consumer"

	"github.com/cairnmq/cairn/internal/stream"
)

// Every test of this package runs its streams on encodingLog: each
// operation is encoded, decoded and the decoded copy applied, so that an
// operation field the encoding forgets, or a decision the apply function
// takes from outside the operation, shows up as a failing test.
func init() {
	defaultNewLog = newEncodingLog
	defaultNewConsumerLog = newEncodingConsumerLog
}

// encodingLog is a local log that applies each operation through its
// byte form (stream.AppendOp, stream.DecodeOp).
type encodingLog struct {
	name  string
	a     Applier[stream.Op]
	index uint64
}

func newEncodingLog(name string, a Applier[stream.Op]) Log[stream.Op] {
	return &encodingLog{name: name, a: a}
}

func (l *encodingLog) Propose(op stream.Op, key uint64) error {
	b, err := stream.AppendOp(nil, op)
	if err != nil {
		panic(fmt.Sprintf("stream %s: encode %T: %v", l.name, op, err))
	}
	dec, err := stream.DecodeOp(b)
	if err != nil {
		panic(fmt.Sprintf("stream %s: decode %T from %x: %v", l.name, op, b, err))
	}
	l.index++
	l.a.Apply(l.index, dec, key)
	return nil
}

// encodingConsumerLog is encodingLog for a consumer's operations.
type encodingConsumerLog struct {
	name  string
	a     Applier[consumer.Op]
	index uint64
}

func newEncodingConsumerLog(streamName, name string, a Applier[consumer.Op]) Log[consumer.Op] {
	return &encodingConsumerLog{name: streamName + " > " + name, a: a}
}

func (l *encodingConsumerLog) Propose(op consumer.Op, key uint64) error {
	b, err := consumer.AppendOp(nil, op)
	if err != nil {
		panic(fmt.Sprintf("consumer %s: encode %T: %v", l.name, op, err))
	}
	dec, err := consumer.DecodeOp(b)
	if err != nil {
		panic(fmt.Sprintf("consumer %s: decode %T from %x: %v", l.name, op, b, err))
	}
	l.index++
	l.a.Apply(l.index, dec, key)
	return nil
}
