package sourcing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream/streamrun"
	"github.com/cairnmq/cairn/internal/jserr"
	"github.com/cairnmq/cairn/internal/stream"
	"github.com/nats-io/nuid"
)

// External sourcing (nats-server v2.15.2 setupMirrorConsumer,
// trySetupSourceConsumer; docs/external-sourcing.md). A mirror or source
// with `external` (and no durable consumer) reads an origin of another
// account, reached through the account's imports of the origin account's
// JetStream API and deliver subjects, or of another domain. Its sourcer
// creates, at each setup, a consumer of its own on the origin, as
// nats-server does:
//
//	subscribe: <deliver prefix>.M.<id> (mirror) or .S.<id> (source), new at each setup
//	create:    PUB <api>.CONSUMER.CREATE.<origin>[.<name>.<filter>]  reply $JSC.R.<id>
//	           header Nats-Required-Api-Level: 4 (mirror) or 5 + Nats-Stream-Identity (source)
//	           {"stream_name":..., "config": {name JS_MIRROR_<hash> / JS_SRC_<hash>, the deliver
//	           subject, by_start_sequence (last copied + 1) or the config's start, ack none,
//	           ack_wait 22h, max_deliver 1, idle_heartbeat 1s, flow_control, direct, sourcing,
//	           inactive_threshold 10s, _nats.mirror.* / _nats.src.* metadata, filters}}
//	answer:    consumer_create_response: its name is the consumer whose deliveries are taken
//
// A server refusing the level (10185, or 10025) is asked at level 4 (a
// source), then without `sourcing` and with a name of its own,
// JS_MIRROR_<hash>_<random>. Deliveries, heartbeats and flow control
// then go as for a durable consumer (durable.go: receive, process,
// control, take); a gap, a silent consumer or a refused copy makes a new
// setup, whose subscription replaces the old one. The previous consumer
// is deleted (<api>.CONSUMER.DELETE.<origin>.<name>, best effort), as
// nats-server deletes its sourcing consumer when the source goes away:
// an origin account on this server keeps interest in the whole deliver
// prefix through its stream export, so the old consumer would not go
// idle.

// External sourcing constants (nats-server v2.15.2 stream.go).
const (
	externalCreateWait = 30 * time.Second // srcConsumerWaitTime
	externalHeartbeat  = time.Second      // sourceHealthHB
	externalAckWait    = 22 * time.Hour
	jsAPIPrefix        = "$JS.API"
)

// createRequest is the consumer create request an external sourcer sends
// (nats-server v2.15.2 CreateConsumerRequest).
type createRequest struct {
	Stream string          `json:"stream_name"`
	Config consumer.Config `json:"config"`
	Action string          `json:"action"`
}

// apiSubject puts the source's external api prefix in place of $JS.API
// in subj, collapsing "..", as nats-server does.
func (s *sourcer) apiSubject(subj string) string {
	ext := s.src.External
	if ext == nil {
		return subj
	}
	subj = strings.Replace(subj, jsAPIPrefix, ext.APIPrefix, 1)
	return strings.ReplaceAll(subj, "..", ".")
}

// consumerID is nats-server's stable hash of the sourcing stream
// (createStableConsumerHash), made stricter for a source whose origin
// the stream sources more than once (createSourcingConsumerHash).
func (s *sourcer) consumerID() string {
	acc := s.env.Account
	if acc == "" {
		acc = "$G"
	}
	id := s.r.Name() + " " + acc
	if s.env.Domain != "" {
		id += " " + s.env.Domain
	}
	id = stream.Hash8(id)
	if !s.mirror && !s.sole {
		id += " " + s.iname
	}
	if s.mirror {
		return id
	}
	return stream.Hash8(id)
}

// runExternal is the goroutine of an external sourcer: it runs the
// exchange while its stream leads here (runLeading).
func (s *sourcer) runExternal() {
	defer close(s.done)
	d := &durableRun{s: s, in: &inbox{sig: make(chan struct{}, 1)}}
	s.runLeading(d, d.setupExternal)
}

// unsubscribe drops the deliver and reply subscriptions of the last
// setup.
func (d *durableRun) unsubscribe() {
	for _, sub := range []streamrun.Subscription{d.dsub, d.rsub} {
		if sub != nil {
			sub.Unsubscribe()
		}
	}
	d.dsub, d.rsub = nil, nil
}

// listen replaces the reply subscription with one on a new reply
// subject.
func (d *durableRun) listen() bool {
	s := d.s
	if d.rsub != nil {
		d.rsub.Unsubscribe()
		d.rsub = nil
	}
	d.reply = inboxPrefix + nuid.Next()
	sub, err := s.env.Transport.Subscribe(d.reply, "", func(subj, reply string, hdr, data []byte) {
		d.in.put(inbound{subject: subj, hdr: bytes.Clone(hdr), data: bytes.Clone(data), answer: true})
	})
	if err != nil {
		s.env.Logf("stream %s: %s %s: subscribe %s: %v", s.r.Name(), s.kind(), s.src.Name, d.reply, err)
		return false
	}
	d.rsub = sub
	return true
}

// deliverTo replaces the deliver subscription with one on a new deliver
// subject and returns the subject ("" on failure).
func (d *durableRun) deliverTo() string {
	s := d.s
	kind := ".S"
	if s.mirror {
		kind = ".M"
	}
	prefix := "" // a remote origin of the account's own (remote.go)
	if s.src.External != nil {
		prefix = s.src.External.DeliverPrefix
	}
	subj := strings.ReplaceAll(prefix+kind+"."+nuid.Next(), "..", ".")
	if prefix == "" {
		subj = "$JS" + kind + "." + nuid.Next()
	}
	if !d.subscribeDeliver(subj) {
		return ""
	}
	return subj
}

// subscribeDeliver replaces the deliver subscription with one on subj.
// Messages of earlier subscriptions still queued carry an older gen and
// are dropped.
func (d *durableRun) subscribeDeliver(subj string) bool {
	s := d.s
	if d.dsub != nil {
		d.dsub.Unsubscribe()
		d.dsub = nil
	}
	d.gen++
	gen := d.gen
	sub, err := s.env.Transport.Subscribe(subj, "", func(subj, reply string, hdr, data []byte) {
		d.in.put(inbound{subject: subj, reply: reply, hdr: bytes.Clone(hdr), data: bytes.Clone(data), gen: gen})
	})
	if err != nil {
		s.env.Logf("stream %s: %s %s: subscribe %s: %v", s.r.Name(), s.kind(), s.src.Name, subj, err)
		return false
	}
	d.dsub = sub
	return true
}

// createConfig is the config of the consumer a setup asks for.
func (d *durableRun) createConfig(deliver string) consumer.Config {
	s := d.s
	prefix, meta := "JS_SRC_", "_nats.src."
	if s.mirror {
		prefix, meta = "JS_MIRROR_", "_nats.mirror."
	}
	acc := s.env.Account
	if acc == "" {
		acc = "$G"
	}
	md := map[string]string{meta + "stream": s.r.Name(), meta + "acc": acc}
	if s.env.Domain != "" {
		md[meta+"domain"] = s.env.Domain
	}
	cfg := consumer.Config{
		Name: prefix + s.consumerID(), DeliverSubject: deliver,
		AckPolicy: consumer.AckNone, AckWait: externalAckWait, MaxDeliver: 1,
		Heartbeat: externalHeartbeat, FlowControl: true, Direct: true, Sourcing: true,
		InactiveThreshold: durableHealthCheck, Metadata: md,
	}
	d.startAt(&cfg)
	cfg.FilterSubject = s.src.FilterSubject
	for _, tr := range s.src.SubjectTransforms {
		cfg.FilterSubjects = append(cfg.FilterSubjects, tr.Source)
	}
	if cfg.FilterSubject == "" && len(cfg.FilterSubjects) == 1 {
		cfg.FilterSubject, cfg.FilterSubjects = cfg.FilterSubjects[0], nil
	}
	return cfg
}

// startAt sets where the consumer starts (nats-server v2.15.2
// setupMirrorConsumer, trySetupSourceConsumer): after the last origin
// sequence copied; before anything was copied at the config's
// opt_start_seq or opt_start_time (for a source no earlier than its last
// message), or, for a source whose stream's first sequence is above 1,
// at its last message's time; else all.
func (d *durableRun) startAt(cfg *consumer.Config) {
	s := d.s
	st := s.r.Store().State(false)
	switch {
	case s.mirror && (st.Msgs > 0 || st.FirstSeq > 0):
		cfg.DeliverPolicy, cfg.OptStartSeq = consumer.DeliverByStartSequence, max(d.sseq, st.LastSeq)+1
		return
	case !s.mirror && d.sseq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = consumer.DeliverByStartSequence, d.sseq+1
		return
	}
	last := time.Unix(0, st.LastTime).UTC()
	switch {
	case s.src.OptStartSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = consumer.DeliverByStartSequence, s.src.OptStartSeq
	case s.src.OptStartTime != nil:
		t := *s.src.OptStartTime
		if !s.mirror && st.LastTime != 0 && t.Before(last) {
			t = last
		}
		cfg.DeliverPolicy, cfg.OptStartTime = consumer.DeliverByStartTime, &t
	case !s.mirror && st.FirstSeq > 1 && st.LastTime != 0 && !d.recreated:
		cfg.DeliverPolicy, cfg.OptStartTime = consumer.DeliverByStartTime, &last
	default:
		cfg.DeliverPolicy = consumer.DeliverAll
	}
}

// createSubject is the subject of the create request of cfg.
func (d *durableRun) createSubject(cfg *consumer.Config) string {
	subj := jsAPIPrefix + ".CONSUMER.CREATE." + d.s.src.Name
	// nats-server names a filter with wildcards in the subject too; this
	// server routes literal subjects only, so such a filter goes in the
	// body alone (the same consumer; docs/external-sourcing.md).
	if cfg.FilterSubject != "" && !strings.ContainsAny(cfg.FilterSubject, "*>") {
		subj += "." + cfg.Name + "." + cfg.FilterSubject
	}
	return d.s.apiSubject(subj)
}

// sendCreate publishes the create request of cfg at API level level (0:
// no level header; 5 adds the origin identity last copied from).
func (d *durableRun) sendCreate(cfg consumer.Config, level int) bool {
	s := d.s
	if !d.listen() {
		return false
	}
	var hdr []byte
	if level > 0 {
		hdr = stream.SetHeader(nil, "Nats-Required-Api-Level", strconv.Itoa(level))
	}
	if level >= 5 {
		hdr = stream.SetHeader(hdr, stream.HdrStreamIdentity, s.ident)
	}
	body, err := json.Marshal(createRequest{Stream: s.src.Name, Config: cfg})
	if err != nil {
		return false
	}
	s.env.Transport.Publish(d.createSubject(&cfg), d.reply, hdr, body)
	return true
}

// setupExternal creates the consumer and reads the answer; it reports
// whether copying can start.
func (d *durableRun) setupExternal() bool {
	s := d.s
	d.dropConsumer()
	deliver := d.deliverTo()
	if deliver == "" {
		return false
	}
	cfg := d.createConfig(deliver)
	level := 4
	if !s.mirror {
		level = 5
	}
	d.lastReq, d.timedOut = s.env.Now(), false
	if !d.sendCreate(cfg, level) {
		return false
	}
	ans, ident, ok := d.awaitAnswer(externalCreateWait, func() (bool, bool) {
		if !cfg.Sourcing {
			return false, true
		}
		if level > 4 {
			level--
		} else {
			// The origin's server does not know sourcing consumers: a
			// name of the sourcer's own.
			cfg.Sourcing, level = false, 0
			cfg.Name = fmt.Sprintf("%s_%s", cfg.Name, stream.Hash8(nuid.Next()))
		}
		return true, d.sendCreate(cfg, level)
	})
	return ok && d.created(ans, ident)
}

// created takes the create request's answer.
func (d *durableRun) created(ans *resetAnswer, ident string) bool {
	s := d.s
	if ans.Error != nil || ans.Config == nil || ans.Name == "" {
		if ans.Error != nil && ans.Error.ErrCode == uint16(jserr.ConsumerStreamIdentityMismatch) && !s.mirror {
			s.ident, d.sseq, d.recreated = "", 0, true // the origin was recreated
			return false
		}
		return d.refused(ans.Error, fmt.Sprintf("create %s consumer of %s", s.kind(), s.src.Name))
	}
	d.cname = ans.Name
	s.mu.Lock()
	s.extConsumer = ans.Name
	s.mu.Unlock()
	if !s.mirror && ident != "" {
		s.ident = ident
	}
	d.dseq, d.fcid, d.fcStalls = 0, "", 0
	s.setError(nil)
	d.heard()
	return true
}

// dropConsumer deletes the consumer of the previous setup, if any; it
// is no longer the one to delete when the source goes (dropExternal).
func (d *durableRun) dropConsumer() {
	if d.cname == "" {
		return
	}
	s := d.s
	s.deleteConsumer(d.cname)
	s.mu.Lock()
	if s.extConsumer == d.cname {
		s.extConsumer = ""
	}
	s.mu.Unlock()
	d.cname = ""
}

// deleteConsumer asks the origin to delete the sourcer's consumer name,
// best effort: the answer is not awaited.
func (s *sourcer) deleteConsumer(name string) {
	subj := s.apiSubject(jsAPIPrefix + ".CONSUMER.DELETE." + s.src.Name + "." + name)
	s.env.Transport.Publish(subj, inboxPrefix+nuid.Next(), nil, nil)
}

// dropExternal deletes the external sourcer's last consumer once it has
// stopped (its stream was deleted or no longer has this source).
func (s *sourcer) dropExternal() {
	if s.src.External == nil || s.src.Consumer != nil {
		return
	}
	s.mu.Lock()
	name := s.extConsumer
	s.mu.Unlock()
	if name != "" {
		s.deleteConsumer(name)
	}
}
