package consumer

import (
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/cairnmq/cairn/internal/subject"
)

// Limits of the consumer configuration (nats-server v2.15.2
// JSMaxDescriptionLen, JSMaxMetadataLen, JSMaxNameLen).
const (
	MaxDescriptionLen = 4 * 1024   // bytes of a description
	MaxMetadataLen    = 128 * 1024 // bytes of all metadata keys and values
	MaxNameLen        = 255        // bytes of a durable name
	MaxGroupNameLen   = 16         // bytes of a priority group name
)

// Smallest non-zero durations the configuration accepts.
const (
	minHeartbeat  = 100 * time.Millisecond // idle_heartbeat of a push consumer
	minMaxExpires = time.Millisecond       // max_expires of a pull consumer
)

// metadataLimitText is MaxMetadataLen as error 10135 prints it.
const metadataLimitText = "128KB"

// invalid returns error 10052 with text (nats-server
// NewJSStreamInvalidConfigError, which consumer checks use too).
func invalid(text string) *jserr.Error {
	return jserr.New(jserr.StreamInvalidConfig, jserr.Sub("err", text))
}

// Validate checks a config that went through SetDefaults, against its
// stream s, with the rules, error codes, texts and order of nats-server
// v2.15.2 checkConsumerCfg (nats-server v2.15.2 ConsumerConfig; nats-server v2.15.2 validation, checkStreamCfg and checkConsumerCfg). It returns
// the first failure:
//
//   - 10052 for a name or durable_name with whitespace, '.', '*', '>',
//     '\' or '/'; replicas: 10126 above the stream's, 10133 negative,
//     10134 neither 0 nor the stream's on an interest or workqueue stream
//     (not checked when recovering is set, as nats-server);
//   - 10181/10182 for an ack or replay policy out of range (Go callers
//     only; JSON decoding refuses them); 10184/10183 for a negative
//     backoff entry or ack_wait; for ack policy flow_control 10218,
//     10219, 10052, 10220, 10221, 10222; 10116 for more backoff entries
//     than max_deliver; 10107 for a description over MaxDescriptionLen;
//   - push: 10079, 10112, 10081 (deliver subject with wildcards, invalid,
//     or stored by the stream), 10080 (max_waiting), 10082 (max_ack_pending
//     with ack none), 10083 (idle_heartbeat under 100 ms);
//   - pull: 10084 (ack none on a workqueue stream), 10086 (rate_limit_bps),
//     10087, 10088 (idle_heartbeat), 10089 (flow_control), 10114, 10115
//     (max_expires under 1 ms);
//   - 10121 and 10153 above the stream's consumer_limits; 10090, 10091
//     for direct; filters: 10136, 10052 "invalid subject", 10139, 10138;
//     10094 for a deliver policy and start mismatch; 10095 for sample_freq;
//     10108 for flow_control without idle_heartbeat; 10132 for a name
//     that is not the durable_name; 10135 for metadata over
//     MaxMetadataLen; priority groups 10178, 10159, 10161, 10162, 10196,
//     10197; 10052 for a stream placement with a preferred server.
//
// Last, it refuses with 10052 a bad dead-letter subject in the metadata
// (stream.CheckDeadLetter, a check of cairn's own: invalid, or captured
// by the stream s).
//
// The rules that need the stream's other consumers or that nats-server
// applies only to a consumer that does not exist yet are elsewhere:
// CheckWorkQueue (10098, 10101, 10099, 10100, after the caller's
// max_consumers check 10026), CheckWorkQueueUpdate and CheckDurableLength.
// Validate applies no account limits: it is ValidateIn with none.
// (nats-server's server jetstream limits, 10121 and 10125 against them,
// do not exist in cairn.)
func (c *Config) Validate(s *stream.Config, recovering bool) *jserr.Error {
	return c.ValidateIn(s, AccountLimits{}, recovering)
}

// ValidateIn is Validate for a consumer of an account with limits acc:
// a max_ack_pending above acc.MaxAckPending (when above 0) is refused
// with 10121 "consumer max ack pending exceeds system limit of <limit>",
// checked just before the stream's consumer_limits, as nats-server
// v2.15.2 checkConsumerCfg does.
func (c *Config) ValidateIn(s *stream.Config, acc AccountLimits, recovering bool) *jserr.Error {
	checks := []func() *jserr.Error{
		c.checkNames,
		func() *jserr.Error { return c.checkReplicas(s, recovering) },
		c.checkEnums,
		c.checkAckWait,
		c.checkAckFlowControl,
		c.checkBackOff,
		c.checkDescription,
		func() *jserr.Error { return c.checkMode(s) },
		func() *jserr.Error { return c.checkAccountLimits(acc) },
		func() *jserr.Error { return c.checkStreamLimits(&s.ConsumerLimits) },
		c.checkDirect,
		c.checkFilters,
		c.checkStart,
		c.checkSampling,
		c.checkFlowControl,
		c.checkNameMatch,
		c.checkMetadata,
		c.checkPriority,
		func() *jserr.Error { return checkPlacement(s) },
		func() *jserr.Error { return stream.CheckDeadLetter(c.Metadata, s.Name, s.Subjects) },
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) checkNames() *jserr.Error {
	if c.Name != "" && !stream.ValidName(c.Name) {
		return invalid(`consumer name can not contain '.', '*', '>', '\', '/'`)
	}
	if c.Durable != "" && !stream.ValidName(c.Durable) {
		return invalid(`consumer durable name can not contain '.', '*', '>', '\', '/'`)
	}
	return nil
}

func (c *Config) checkReplicas(s *stream.Config, recovering bool) *jserr.Error {
	switch {
	case c.Replicas > 0 && c.Replicas > s.Replicas:
		return jserr.New(jserr.ConsumerReplicasExceedsStream)
	case c.Replicas < 0:
		return jserr.New(jserr.ReplicasCountCannotBeNegative)
	case recovering || s.Retention == stream.LimitsPolicy:
		return nil
	case c.Replicas != 0 && c.Replicas != s.Replicas:
		return jserr.New(jserr.ConsumerReplicasShouldMatchStream)
	}
	return nil
}

// checkEnums catches policies set in Go outside their range.
func (c *Config) checkEnums() *jserr.Error {
	if c.AckPolicy < 0 || int(c.AckPolicy) >= len(ackNames) {
		return jserr.New(jserr.ConsumerAckPolicyInvalid)
	}
	if c.ReplayPolicy < 0 || int(c.ReplayPolicy) >= len(replayNames) {
		return jserr.New(jserr.ConsumerReplayPolicyInvalid)
	}
	if c.PriorityPolicy < 0 || int(c.PriorityPolicy) >= len(priorityNames) {
		return invalid("unknown priority policy")
	}
	return nil
}

func (c *Config) checkAckWait() *jserr.Error {
	for _, d := range c.BackOff {
		if d < 0 {
			return jserr.New(jserr.ConsumerBackOffNegative)
		}
	}
	if c.AckWait < 0 {
		return jserr.New(jserr.ConsumerAckWaitNegative)
	}
	return nil
}

// checkAckFlowControl: ack policy flow_control needs a flow-controlled
// push consumer with a 1 s heartbeat, max_ack_pending and no redelivery.
func (c *Config) checkAckFlowControl() *jserr.Error {
	if c.AckPolicy != AckFlowControl {
		return nil
	}
	switch {
	case !c.IsPush():
		return jserr.New(jserr.ConsumerAckFCRequiresPush)
	case !c.FlowControl:
		return jserr.New(jserr.ConsumerAckFCRequiresFC)
	case c.Heartbeat != FlowControlHeartbeat:
		return invalid("flow control ack policy heartbeat needs to be 1s")
	case c.MaxAckPending <= 0:
		return jserr.New(jserr.ConsumerAckFCRequiresMaxAckPending)
	case c.AckWait != 0 || len(c.BackOff) > 0:
		return jserr.New(jserr.ConsumerAckFCRequiresNoAckWait)
	case c.MaxDeliver > 0:
		return jserr.New(jserr.ConsumerAckFCRequiresNoMaxDeliver)
	}
	return nil
}

// checkBackOff refuses more backoff entries than delivery attempts.
func (c *Config) checkBackOff() *jserr.Error {
	if n := len(c.BackOff); n > 0 && c.MaxDeliver != -1 && n > c.MaxDeliver {
		return jserr.New(jserr.ConsumerMaxDeliverBackoff)
	}
	return nil
}

func (c *Config) checkDescription() *jserr.Error {
	if len(c.Description) > MaxDescriptionLen {
		return jserr.New(jserr.ConsumerDescriptionTooLong, jserr.Sub("max", MaxDescriptionLen))
	}
	return nil
}

// checkMode runs the push or the pull checks.
func (c *Config) checkMode(s *stream.Config) *jserr.Error {
	if c.IsPush() {
		return c.checkPush(s)
	}
	return c.checkPull(s)
}

func (c *Config) checkPush(s *stream.Config) *jserr.Error {
	switch {
	case !subject.IsLiteral(c.DeliverSubject):
		return jserr.New(jserr.ConsumerDeliverToWildcards)
	case !subject.ValidSubject(c.DeliverSubject):
		return jserr.New(jserr.ConsumerInvalidDeliverSubject)
	case deliveryFormsCycle(s, c.DeliverSubject):
		return jserr.New(jserr.ConsumerDeliverCycle)
	case c.MaxWaiting != 0:
		return jserr.New(jserr.ConsumerPushMaxWaiting)
	case c.MaxAckPending > 0 && c.AckPolicy == AckNone:
		return jserr.New(jserr.ConsumerMaxPendingAckPolicyRequired)
	case c.Heartbeat > 0 && c.Heartbeat < minHeartbeat:
		return jserr.New(jserr.ConsumerSmallHeartbeat)
	}
	return nil
}

func (c *Config) checkPull(s *stream.Config) *jserr.Error {
	switch {
	case c.AckPolicy == AckNone && s.Retention == stream.WorkQueuePolicy:
		return jserr.New(jserr.ConsumerPullRequiresAck)
	case c.RateLimit > 0:
		return jserr.New(jserr.ConsumerPullWithRateLimit)
	case c.MaxWaiting < 0:
		return jserr.New(jserr.ConsumerMaxWaitingNegative)
	case c.Heartbeat > 0:
		return jserr.New(jserr.ConsumerHBRequiresPush)
	case c.FlowControl:
		return jserr.New(jserr.ConsumerFCRequiresPush)
	case c.MaxRequestBatch < 0:
		return jserr.New(jserr.ConsumerMaxRequestBatchNegative)
	case c.MaxRequestExpires != 0 && c.MaxRequestExpires < minMaxExpires:
		return jserr.New(jserr.ConsumerMaxRequestExpiresTooSmall)
	}
	return nil
}

// deliveryFormsCycle reports whether the stream stores what is delivered
// to subj (nats-server deliveryFormsCycle).
func deliveryFormsCycle(s *stream.Config, subj string) bool {
	for _, stored := range s.Subjects {
		if subsetMatch(subj, stored) {
			return true
		}
	}
	return false
}

// checkAccountLimits compares with the account's max_ack_pending.
func (c *Config) checkAccountLimits(acc AccountLimits) *jserr.Error {
	if acc.MaxAckPending > 0 && c.MaxAckPending > acc.MaxAckPending {
		return jserr.New(jserr.ConsumerMaxPendingAckExcess, jserr.Sub("limit", acc.MaxAckPending))
	}
	return nil
}

// checkStreamLimits compares with the stream's consumer_limits; 10153
// prints the limit as a Go duration ("10s").
func (c *Config) checkStreamLimits(lim *stream.ConsumerLimits) *jserr.Error {
	if lim.MaxAckPending > 0 && c.MaxAckPending > lim.MaxAckPending {
		return jserr.New(jserr.ConsumerMaxPendingAckExcess, jserr.Sub("limit", lim.MaxAckPending))
	}
	if lim.InactiveThreshold > 0 && c.InactiveThreshold > lim.InactiveThreshold {
		return jserr.New(jserr.ConsumerInactiveThresholdExcess, jserr.Sub("limit", lim.InactiveThreshold))
	}
	return nil
}

// checkDirect: direct consumers (nats-server's mirrors and sources) are
// push ephemerals.
func (c *Config) checkDirect() *jserr.Error {
	switch {
	case !c.Direct:
		return nil
	case !c.IsPush():
		return jserr.New(jserr.ConsumerDirectRequiresPush)
	case c.IsDurable():
		return jserr.New(jserr.ConsumerDirectRequiresEphemeral)
	}
	return nil
}

// checkFilters checks filter_subject and filter_subjects. Overlap here
// means one filter is a subset of another (subsetMatch), so "a.*" and
// "*.b" may stand together.
func (c *Config) checkFilters() *jserr.Error {
	if c.FilterSubject != "" && len(c.FilterSubjects) > 0 {
		return jserr.New(jserr.ConsumerDuplicateFilterSubjects)
	}
	if c.FilterSubject != "" && !subject.ValidSubject(c.FilterSubject) {
		return invalid("invalid subject")
	}
	for _, f := range c.FilterSubjects {
		if f == "" {
			return jserr.New(jserr.ConsumerEmptyFilter)
		}
	}
	filters := c.Filters()
	for i, f := range filters {
		if !subject.ValidSubject(f) {
			return invalid("invalid subject")
		}
		for j, g := range filters {
			if i != j && subsetMatch(f, g) {
				return jserr.New(jserr.ConsumerOverlappingSubjectFilters)
			}
		}
	}
	return nil
}

// subsetMatch reports whether every subject matched by sub is matched by
// test, as nats-server v2.15.2 decides it for consumer filters and deliver
// subjects (server/sublist.go subjectIsSubsetMatch). That walk does not
// validate test, and it treats any token of test that starts with '*'
// (such as "*x") as a wildcard: subsetMatch("a.bar", "a.*x") is true, so
// the filters ["a.bar","a.*x"] give 10138 there and here.
func subsetMatch(sub, test string) bool {
	st, tt := strings.Split(sub, "."), strings.Split(test, ".")
	for i, t := range tt {
		switch {
		case i >= len(st) || t == "":
			return false
		case t == ">":
			return true
		}
		switch s := st[i]; {
		case s == "" || s == ">":
			return false
		case s == "*":
			if t != "*" {
				return false
			}
		case t[0] != '*' && s != t:
			return false
		}
	}
	return len(st) == len(tt)
}

// checkStart checks that opt_start_seq and opt_start_time go with the
// deliver policy, with nats-server's texts.
func (c *Config) checkStart() *jserr.Error {
	name, wantSeq, wantTime := c.DeliverPolicy.startNeeds()
	hasSeq, hasTime := c.OptStartSeq > 0, c.OptStartTime != nil
	switch {
	case wantSeq && !hasSeq:
		return badPolicy(name, "optional start sequence is not set")
	case wantTime && !hasTime:
		return badPolicy(name, "optional start time is not set")
	case hasSeq && !wantSeq:
		what := "sequence"
		if wantTime {
			what = "start sequence"
		}
		return badPolicy(name, "optional start "+what+" is also set")
	case hasTime && !wantTime:
		return badPolicy(name, "optional start time is also set")
	case c.DeliverPolicy == DeliverLastPerSubject && len(c.Filters()) == 0:
		return badPolicy(name, "optional filter subject is not set")
	}
	return nil
}

// startNeeds names p as nats-server's 10094 texts do and says whether it
// needs opt_start_seq or opt_start_time. Policies out of range need
// neither and are not checked, as in nats-server.
func (p DeliverPolicy) startNeeds() (name string, seq, time bool) {
	switch p {
	case DeliverByStartSequence:
		return "by start sequence", true, false
	case DeliverByStartTime:
		return "by start time", false, true
	case DeliverLastPerSubject:
		return "last per subject", false, false
	case DeliverAll, DeliverLast, DeliverNew:
		return p.String(), false, false
	}
	return "", false, false
}

// badPolicy returns 10094 "consumer delivery policy is deliver <name>,
// but <what>".
func badPolicy(name, what string) *jserr.Error {
	return jserr.New(jserr.ConsumerInvalidPolicy,
		jserr.Sub("err", "consumer delivery policy is deliver "+name+", but "+what))
}

// checkSampling accepts "<n>" or "<n>%" with n >= 0; the 10095 text
// carries strconv's error, or "<nil>" for a negative n.
func (c *Config) checkSampling() *jserr.Error {
	if c.SampleFrequency == "" {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(c.SampleFrequency, "%"))
	if err != nil || n < 0 {
		return jserr.New(jserr.ConsumerInvalidSampling, jserr.Sub("err", err))
	}
	return nil
}

func (c *Config) checkFlowControl() *jserr.Error {
	if c.FlowControl && c.Heartbeat == 0 {
		return jserr.New(jserr.ConsumerWithFlowControlNeedsHeartbeats)
	}
	return nil
}

func (c *Config) checkNameMatch() *jserr.Error {
	if c.Durable != "" && c.Name != "" && c.Name != c.Durable {
		return jserr.New(jserr.ConsumerCreateDurableAndNameMismatch)
	}
	return nil
}

func (c *Config) checkMetadata() *jserr.Error {
	n := 0
	for k, v := range c.Metadata {
		n += len(k) + len(v)
	}
	if n > MaxMetadataLen {
		return jserr.New(jserr.ConsumerMetadataLength, jserr.Sub("limit", metadataLimitText))
	}
	return nil
}

// checkPriority: a policy needs a pull consumer and valid group names;
// without a policy, no groups and no priority_timeout.
func (c *Config) checkPriority() *jserr.Error {
	if c.PriorityPolicy == PriorityNone {
		switch {
		case len(c.PriorityGroups) > 0:
			return jserr.New(jserr.ConsumerPriorityGroupWithPolicyNone)
		case c.PinnedTTL > 0:
			return jserr.New(jserr.ConsumerPinnedTTLWithoutPriorityPolicyNone)
		}
		return nil
	}
	switch {
	case c.IsPush():
		return jserr.New(jserr.ConsumerPushWithPriorityGroup)
	case len(c.PriorityGroups) == 0:
		return jserr.New(jserr.ConsumerPriorityPolicyWithoutGroup)
	}
	for _, g := range c.PriorityGroups {
		if g == "" {
			return jserr.New(jserr.ConsumerEmptyGroupName)
		}
		if !ValidGroupName(g) {
			return jserr.New(jserr.ConsumerInvalidGroupName)
		}
	}
	return nil
}

// ValidGroupName reports whether g may name a priority group: 1 to
// MaxGroupNameLen bytes from A-Z, a-z, 0-9 and "/_=-" (nats-server
// validGroupName; otherwise 10162, or 10161 when empty).
func ValidGroupName(g string) bool {
	if len(g) == 0 || len(g) > MaxGroupNameLen {
		return false
	}
	for i := 0; i < len(g); i++ {
		switch b := g[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '/' || b == '_' || b == '=' || b == '-':
		default:
			return false
		}
	}
	return true
}

// checkPlacement repeats nats-server's last check, which stream
// validation already makes.
func checkPlacement(s *stream.Config) *jserr.Error {
	if s.Placement != nil && s.Placement.Preferred != "" {
		return invalid("preferred server not permitted in placement")
	}
	return nil
}

// CheckDurableLength returns 10102 "consumer name is too long, maximum
// allowed is 255" for a durable_name over MaxNameLen bytes. nats-server
// v2.15.2 checks it only for a consumer that does not exist yet, after
// CheckWorkQueue (consumer.go addConsumerWithAssignment).
func (c *Config) CheckDurableLength() *jserr.Error {
	if len(c.Durable) > MaxNameLen {
		return jserr.New(jserr.ConsumerNameTooLong, jserr.Sub("max", MaxNameLen))
	}
	return nil
}
