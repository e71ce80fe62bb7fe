package consumer

import (
	"testing"

	"github.com/cairnmq/cairn/internal/jserr"
)

// TestCheckWorkQueue covers the rules in nats-server v2.15.2's order
// (addConsumerWithAssignment) and its exemptions for direct and sourcing
// consumers, on either side (numLimitableConsumers, partitionUnique).
func TestCheckWorkQueue(t *testing.T) {
	wq := func(filters ...string) *Config {
		return &Config{AckPolicy: AckExplicit, FilterSubjects: filters}
	}
	sourcing := &Config{Sourcing: true, AckPolicy: AckFlowControl}
	direct := &Config{Direct: true, DeliverSubject: "d"}
	cases := []struct {
		name   string
		cfg    *Config
		others []*Config
		want   jserr.ErrCode
	}{
		{"first unfiltered", wq(), nil, 0},
		{"ack none", &Config{}, nil, jserr.ConsumerWQRequiresExplicitAck},
		{"ack all", &Config{AckPolicy: AckAll}, nil, jserr.ConsumerWQRequiresExplicitAck},
		{"ack flow_control", &Config{AckPolicy: AckFlowControl}, nil, 0},
		{"ack before deliver policy", &Config{DeliverPolicy: DeliverNew}, nil, jserr.ConsumerWQRequiresExplicitAck},
		{"deliver last", &Config{AckPolicy: AckExplicit, DeliverPolicy: DeliverLast}, nil, jserr.ConsumerWQConsumerNotDeliverAll},
		{"deliver policy before others", &Config{AckPolicy: AckExplicit, DeliverPolicy: DeliverNew}, []*Config{wq()}, jserr.ConsumerWQConsumerNotDeliverAll},
		{"second unfiltered", wq(), []*Config{wq("a")}, jserr.ConsumerWQMultipleUnfiltered},
		{"filtered beside unfiltered", wq("a"), []*Config{wq()}, jserr.ConsumerWQConsumerNotUnique},
		{"disjoint filters", wq("a", "b.*"), []*Config{wq("c"), wq("b.x.y")}, 0},
		{"overlap with a wildcard", wq("b.*"), []*Config{wq("c"), wq("*.x")}, jserr.ConsumerWQConsumerNotUnique},
		{"filter_subject overlap", &Config{AckPolicy: AckExplicit, FilterSubject: "a.>"}, []*Config{wq("a.b")}, jserr.ConsumerWQConsumerNotUnique},
		{"unfiltered beside sourcing only", wq(), []*Config{sourcing}, 0},
		{"unfiltered beside direct only", wq(), []*Config{direct}, 0},
		{"filtered beside unfiltered sourcing", wq("a"), []*Config{sourcing, direct}, 0},
		{"sourcing itself", &Config{Sourcing: true}, []*Config{wq()}, 0},
		{"direct itself", &Config{Direct: true}, []*Config{wq()}, 0},
	}
	for _, tc := range cases {
		err := CheckWorkQueue(tc.cfg, tc.others)
		if got := errCode(err); got != tc.want {
			t.Errorf("%s: CheckWorkQueue = %v, want %d", tc.name, err, tc.want)
		}
	}
}

// TestCheckWorkQueueUpdate: an existing consumer only has to stay unique,
// and may even drop its filter beside others (observed on nats-server).
func TestCheckWorkQueueUpdate(t *testing.T) {
	others := []*Config{{AckPolicy: AckExplicit, FilterSubject: "w.b"}}
	if err := CheckWorkQueueUpdate(&Config{AckPolicy: AckExplicit}, others); err != nil {
		t.Fatalf("unfiltered update: %v", err)
	}
	if err := CheckWorkQueueUpdate(&Config{FilterSubject: "w.*"}, others); errCode(err) != jserr.ConsumerWQConsumerNotUnique {
		t.Fatalf("overlapping update: %v", err)
	}
	if err := CheckWorkQueueUpdate(&Config{FilterSubject: "w.a"}, append(others, &Config{})); errCode(err) != jserr.ConsumerWQConsumerNotUnique {
		t.Fatalf("update beside an unfiltered consumer: %v", err)
	}
}

func errCode(err *jserr.Error) jserr.ErrCode {
	if err == nil {
		return 0
	}
	return jserr.ErrCode(err.ErrCode)
}
