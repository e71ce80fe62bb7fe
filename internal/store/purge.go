package store

// PurgeKind says which of the shapes of docs/protocol.md 6.3 a
// PurgeRequest takes.
type PurgeKind int

// Purge kinds.
const (
	PurgeNone     PurgeKind = iota // remove nothing
	PurgeAll                       // remove everything: FirstSeq becomes LastSeq+1
	PurgeCompact                   // Compact(PurgePlan.Seq)
	PurgeMatching                  // remove matching messages (see PurgePlan)
)

// PurgePlan is how an engine carries out a PurgeRequest, following
// nats-server v2.15.2 PurgeEx. For PurgeMatching the engine walks the
// stored messages whose subject matches Filter in ascending sequence
// order and removes each one with a sequence below Below (0: no bound),
// stopping once Max were removed (0: no cap). Every removal updates
// FirstSeq like Delete does.
type PurgePlan struct {
	Kind   PurgeKind
	Seq    uint64 // PurgeCompact: the argument to Compact
	Filter string // PurgeMatching: the subject filter, never ""
	Below  uint64 // PurgeMatching: remove only sequences < Below
	Max    uint64 // PurgeMatching: remove at most Max messages
}

// PlanPurge turns req into a plan. count returns the number of stored
// messages matching a filter; it is called only when req.Keep > 0. It
// returns ErrBadRequest when req has both Seq and Keep. The rules:
//
//   - Seq == 1 removes nothing ("below 1").
//   - With no filter ("" or ">"): no Seq and no Keep is PurgeAll (even on
//     an empty store: FirstSeq becomes LastSeq+1); Seq > 1 is
//     PurgeCompact(Seq), which may raise LastSeq to Seq-1 when Seq is past
//     the end; Keep > 0 keeps the newest Keep messages of the stream.
//   - With a filter: Seq > 1 removes the matching messages below Seq;
//     Keep > 0 removes the oldest matching messages so that Keep remain
//     (nothing when Keep >= the matching count).
func PlanPurge(req PurgeRequest, count func(filter string) uint64) (PurgePlan, error) {
	if req.Seq > 0 && req.Keep > 0 {
		return PurgePlan{}, ErrBadRequest
	}
	if req.Seq == 1 {
		return PurgePlan{Kind: PurgeNone}, nil
	}
	filter := req.Subject
	if IsFilterAll(filter) {
		switch {
		case req.Keep == 0 && req.Seq == 0:
			return PurgePlan{Kind: PurgeAll}, nil
		case req.Seq > 1:
			return PurgePlan{Kind: PurgeCompact, Seq: req.Seq}, nil
		}
		filter = FilterAll
	}
	plan := PurgePlan{Kind: PurgeMatching, Filter: filter, Below: req.Seq}
	if req.Keep > 0 {
		n := count(filter)
		if req.Keep >= n {
			return PurgePlan{Kind: PurgeNone}, nil
		}
		plan.Max = n - req.Keep
	}
	return plan, nil
}
