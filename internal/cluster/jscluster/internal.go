package jscluster

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/cluster/meta"
	"github.com/cairnmq/cairn/internal/consumer"
	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/nats-io/nuid"
)

// The servers of a cluster ask each other through the system account
// (AttachSystem), on subjects no client of another account can reach, as
// nats-server v2.15.2 does:
//
//	$JSC.SI.<account>.<stream>                 request: the server whose replica leads
//	                                           the stream answers with its info
//	                                           (STREAM.LIST of the meta leader, gather.go)
//	$JSC.CI.<account>.<stream>.<consumer>      request: the server whose replica leads
//	                                           the consumer answers with
//	                                           consumerInfoReply (LIST and create
//	                                           answers of the meta leader); an empty
//	                                           body asks for an answer now, a
//	                                           consumerInfoWait one lets a replica
//	                                           that will lead answer once it does
//	$SYS.JSC.CONSUMER.ASSIGNMENT.DELETE        no reply: assignmentDelete, the consumer
//	                                           past its inactive_threshold; the meta
//	                                           leader proposes its RemoveConsumer
//	$SYS.JSC.STREAM.REPLICA.LOST               no reply: replicaLostMsg, a replica that
//	                                           lost its state at a restart; the meta
//	                                           leader proposes its replacement, or the
//	                                           stream's reset when such replicas are a
//	                                           majority and no leader answers (lost.go)
//	$SYS.JSC.STREAM.SETTLE                     no reply: settleMsg, a stream scaled down
//	                                           to one replica runs without its group;
//	                                           the meta leader proposes its SettleStream
//	                                           (scaledown.go)
//	$SYS.JSC.SERVER.REMOVED.<incarnation>      request: whether that store was removed
//	                                           (SERVER.REMOVE); answered only by a server
//	                                           whose catalogue says so (removedown.go)
//	$SYS.JSC.ACCOUNT.USAGE                     no reply: usage.Report, what each account's
//	                                           streams hold on the sender (accountusage.go)
//	$SYS._INBOX.<id>.<n>                       the replies to this server's requests
//
// nats-server answers $JSC.CI with the ConsumerInfo alone; cairn's reply
// also carries the assigned config the replica runs, so that the meta
// leader can tell when an update reached the consumer's leader. The
// subjects are cairn's only between cairn servers.
const (
	consumerInfoPrefix = "$JSC.CI."
	assignmentDelete   = "$SYS.JSC.CONSUMER.ASSIGNMENT.DELETE"
	inboxPrefix        = "$SYS._INBOX."
)

// consumerInfoReply is the answer to $JSC.CI: the info of the consumer
// as its leader reports it and the assignment config (meta.ConsumerAssignment.Config)
// its replica runs.
type consumerInfoReply struct {
	Config json.RawMessage `json:"config"`
	Info   *consumer.Info  `json:"info"`
}

// consumerInfoWait is the body of a $JSC.CI request that waits: a
// server whose replica leads the consumer with the assigned config
// Config (any config when empty) within Wait answers then; the others
// stop waiting as soon as they know they will not (the consumer is
// assigned elsewhere, or its group has another leader).
type consumerInfoWait struct {
	Wait   time.Duration   `json:"wait"`
	Config json.RawMessage `json:"config,omitempty"`
}

// assignmentDeleteMsg is the body of $SYS.JSC.CONSUMER.ASSIGNMENT.DELETE
// (nats-server v2.15.2 consumerAssignmentDelete): the consumer is removed
// only if its assignment was created at created (a consumer created again
// under the name is another one).
type assignmentDeleteMsg struct {
	Account  string    `json:"account"`
	Stream   string    `json:"stream"`
	Consumer string    `json:"consumer"`
	Created  time.Time `json:"created"`
}

// system is the cluster layer's part of the system account.
type system struct {
	mu      sync.Mutex
	tr      jetstream.Transport
	subs    []jetstream.Subscription
	inbox   string // inboxPrefix + a random token + "."
	next    uint64
	waiters map[string]chan []byte
	// busy counts the $JSC.CI requests being answered (at most
	// maxInfoAnswers; more are dropped, and the requester times out).
	busy int
}

// maxInfoAnswers bounds the $JSC.CI requests a server answers (or waits
// to answer) at once; maxInfoWait bounds a request's wait.
const (
	maxInfoAnswers = 256
	maxInfoWait    = 5 * time.Second
)

// errNoAnswer: a request of the system account got no answer in time.
var errNoAnswer = errors.New("jscluster: no answer")

// AttachSystem gives the cluster layer the system account's transport
// (subscriptions shared with the cluster) and subscribes to its subjects
// (package comment above). The server calls it once, after Start, when
// its system account is ready. Errors: the transport's subscribe.
func (c *Cluster) AttachSystem(tr jetstream.Transport) error {
	s := &c.sys
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr != nil {
		return nil
	}
	s.tr = tr
	s.inbox = inboxPrefix + nuid.Next() + "."
	s.waiters = map[string]chan []byte{}
	for _, sub := range []struct {
		subj string
		h    jetstream.MsgHandler
	}{
		{consumerInfoPrefix + "*.*.*", c.onConsumerInfo},
		{streamInfoPrefix + "*.*", c.onStreamInfo}, // gather.go
		{assignmentDelete, c.onAssignmentDelete},
		{replicaLost, c.onReplicaLost},                 // lost.go
		{settleSubject, c.onSettle},                    // scaledown.go
		{consumerSettleSubject, c.onConsumerSettle},    // consumerdown.go
		{groupMembersPrefix + "*.*", c.onGroupMembers}, // cancelmove.go
		{moveDoneSubject, c.onMoveDone},                // cancelmove.go
		{removedPrefix + "*", c.onRemovedAsk},          // removedown.go
		{usageSubject, c.onUsage},                      // accountusage.go
		{s.inbox + "*", c.onReply},
	} {
		x, err := tr.Subscribe(sub.subj, "", sub.h)
		if err != nil {
			return err
		}
		s.subs = append(s.subs, x)
	}
	return nil
}

// detachSystem ends the system account's subscriptions (Close).
func (c *Cluster) detachSystem() {
	s := &c.sys
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, x := range subs {
		x.Unsubscribe()
	}
}

// publishSystem publishes in the system account; false without one.
func (c *Cluster) publishSystem(subj, reply string, data []byte) bool {
	c.sys.mu.Lock()
	tr := c.sys.tr
	c.sys.mu.Unlock()
	if tr == nil {
		return false
	}
	tr.Publish(subj, reply, nil, data)
	return true
}

// requestAll sends one request with body to each of subjects in the
// system account and waits, at most timeout, for their answers: out[i]
// is the answer to subjects[i], nil when none came within timeout (an
// answer that came is kept whatever the others did).
func (c *Cluster) requestAll(subjects []string, body []byte, timeout time.Duration) [][]byte {
	s := &c.sys
	out := make([][]byte, len(subjects))
	chs := make([]chan []byte, len(subjects))
	tokens := make([]string, len(subjects))
	s.mu.Lock()
	tr := s.tr
	if tr == nil {
		s.mu.Unlock()
		return out
	}
	for i := range subjects {
		s.next++
		tokens[i] = s.inbox + strconv.FormatUint(s.next, 10)
		chs[i] = make(chan []byte, 1)
		s.waiters[tokens[i]] = chs[i]
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, t := range tokens {
			delete(s.waiters, t)
		}
		s.mu.Unlock()
	}()
	for i, subj := range subjects {
		tr.Publish(subj, tokens[i], nil, body)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := range chs {
		select {
		case out[i] = <-chs[i]:
		case <-deadline.C:
			// Answers to later subjects may have come already (each
			// channel holds one): keep them, so that one subject that
			// never answers does not take every later one with it.
			for j := i + 1; j < len(chs); j++ {
				select {
				case out[j] = <-chs[j]:
				default:
				}
			}
			return out
		case <-c.quit:
			return out
		}
	}
	return out
}

// onReply takes an answer to one of this server's requests (on the
// publisher's goroutine: it must not block).
func (c *Cluster) onReply(subject, _ string, _, data []byte) {
	s := &c.sys
	s.mu.Lock()
	ch := s.waiters[subject]
	delete(s.waiters, subject)
	s.mu.Unlock()
	if ch != nil {
		ch <- append([]byte(nil), data...)
	}
}

// consumerInfoSubject is the $JSC.CI subject of consumer k.
func consumerInfoSubject(k consumerKey) string {
	return consumerInfoPrefix + k.account + "." + k.stream + "." + k.name
}

// onConsumerInfo answers $JSC.CI when this server's replica leads the
// consumer named (apart from the publisher's goroutine), at once or,
// for a request that waits (consumerInfoWait), once it does.
func (c *Cluster) onConsumerInfo(subject, reply string, _, data []byte) {
	toks := strings.Split(strings.TrimPrefix(subject, consumerInfoPrefix), ".")
	if reply == "" || len(toks) != 3 {
		return
	}
	k := consumerKey{toks[0], toks[1], toks[2]}
	var w consumerInfoWait
	if len(data) > 0 && json.Unmarshal(data, &w) != nil {
		return
	}
	w.Wait = min(max(w.Wait, 0), maxInfoWait)
	if cr := c.creplicaOf(k); w.Wait == 0 && (cr == nil || !cr.leads.Load()) {
		return
	}
	s := &c.sys
	s.mu.Lock()
	if s.busy >= maxInfoAnswers {
		s.mu.Unlock()
		return
	}
	s.busy++
	s.mu.Unlock()
	want := slices.Clone(w.Config)
	go func() {
		defer func() {
			s.mu.Lock()
			s.busy--
			s.mu.Unlock()
		}()
		deadline := time.Now().Add(w.Wait)
		var pause backoff
		for !c.answerConsumerInfo(k, reply, want) {
			if !time.Now().Before(deadline) || !c.mayLead(k) {
				return
			}
			select {
			case <-c.quit:
				return
			case <-time.After(pause.next()):
			}
		}
	}()
}

// answerConsumerInfo sends the info of consumer k to reply if this
// server's replica leads it with the assigned config want (any when
// empty), and reports whether it did. Its first answer since the replica
// came to lead waits until every route peer has processed the
// consumer's subscriptions (announce).
func (c *Cluster) answerConsumerInfo(k consumerKey, reply string, want []byte) bool {
	cr := c.creplicaOf(k)
	if cr == nil || !cr.leads.Load() {
		return false
	}
	c.mu.Lock()
	acc := c.accounts[k.account]
	cfg := cr.ca.Config
	c.mu.Unlock()
	if acc == nil || acc.js == nil || (len(want) > 0 && string(want) != string(cfg)) || !acc.js.ConsumerLeads(k.stream, k.name) {
		return false
	}
	c.announce(cr)
	info, jerr := c.consumerInfo(acc, k)
	if jerr != nil {
		return false
	}
	body, err := json.Marshal(consumerInfoReply{Config: cfg, Info: info})
	if err != nil {
		return false
	}
	c.publishSystem(reply, "", body)
	return true
}

// announce flushes the routes (Host.FlushRoutes) the first time the
// replica cr answers since it came to lead, so that every peer has
// processed its subscriptions (the interest a subscription adds is
// queued to every route as it is made) before the meta leader answers
// the create or update this answer confirms. Otherwise a client of a
// third server, answered through the meta leader's route, could send its
// first pull request or ack before that server learned the consumer's
// interest over this server's route: a 503 no responders (a Fetch that
// ends at once with nothing). nats-server v2.15.2 has the consumer's
// leader answer the create itself, after it subscribed
// (processConsumerLeaderChange), on the route that carried the
// interest. A flush that times out is not recorded: the next answer
// flushes again.
func (c *Cluster) announce(cr *creplica) {
	if cr.announced.Load() {
		return
	}
	if c.host.FlushRoutes(announceTimeout) {
		cr.announced.Store(true)
	}
}

// announceTimeout bounds the wait of announce for the peers' PONGs.
const announceTimeout = time.Second

// mayLead reports whether this server's replica of consumer k may yet
// lead it: the meta group (as far as this server applied it) does not
// assign the consumer elsewhere, and its group, if this server runs a
// replica of it, has no other leader.
func (c *Cluster) mayLead(k consumerKey) bool {
	ca, _, assigned, here := c.consumerAssignment(k)
	if assigned && !here {
		return false
	}
	if cr := c.creplicaOf(k); cr != nil && cr.log != nil {
		if st, err := c.node.Status(ca.Group); err == nil && st.LeaderServer != "" && st.LeaderServer != c.name {
			return false
		}
	}
	return true
}

// remoteConsumerInfo asks the server whose replica leads consumer k for
// its info once it runs the assigned config want (any when nil), waiting
// at most wait for it. Errors: errNoAnswer.
func (c *Cluster) remoteConsumerInfo(k consumerKey, want []byte, wait time.Duration) (consumerInfoReply, error) {
	var r consumerInfoReply
	body, _ := json.Marshal(consumerInfoWait{Wait: wait, Config: want})
	ans := c.requestAll([]string{consumerInfoSubject(k)}, body, wait+remoteInfoSlack)[0]
	if ans == nil || json.Unmarshal(ans, &r) != nil || r.Info == nil {
		return r, errNoAnswer
	}
	return r, nil
}

// awaitSuccessor is consumerlog.Config.AwaitSuccessor for this server's
// replica of consumer k, which stopped leading (its own goroutine): it
// asks $JSC.CI with a wait, which the replica leading next answers once
// it subscribed and flushed its routes (announce), and calls done then.
// Until done, the old leader keeps its subscriptions and the pull
// requests that waited on it (consumerrun, endOrphans), so that a client
// sending its request again on their 409 Leadership Change reaches a
// server that knows the successor's interest (docs/cluster.md,
// "Moving the subscriptions"). A replica stops waiting to answer as soon
// as its group's status names another leader (mayLead), which the
// successor's may still do (the old one) while it campaigns: so it asks
// again, successorAsk at a time, until successorWait has passed; done is
// then not called (the consumer gives up on its own).
func (c *Cluster) awaitSuccessor(k consumerKey, done func()) {
	body, _ := json.Marshal(consumerInfoWait{Wait: successorAsk})
	deadline := time.Now().Add(successorWait)
	for time.Now().Before(deadline) {
		asked := time.Now()
		if ans := c.requestAll([]string{consumerInfoSubject(k)}, body, successorAsk+remoteInfoSlack)[0]; ans != nil {
			done()
			return
		}
		// Not answered at once means the request went out (or the
		// Cluster closes): a request returned at once has no transport
		// yet, and waits a little before asking again.
		if time.Since(asked) < successorAsk {
			select {
			case <-c.quit:
				return
			case <-time.After(successorAsk):
			}
		}
	}
}

// successorWait is how long awaitSuccessor asks for the next leader's
// answer: the old leader ends its orphaned pull requests 4 s after it
// stopped leading at the latest (consumerrun's orphanWait);
// successorAsk is the wait of one of its requests.
const (
	successorWait = 4 * time.Second
	successorAsk  = 250 * time.Millisecond
)

// remoteInfoSlack is how much longer than the wait it asks for the meta
// leader waits for a $JSC.CI answer (the answer's trip).
const remoteInfoSlack = 500 * time.Millisecond

// askRemoveInactive is the engines' RemoveInactive (jetstream.Config): it
// asks the meta leader, through the system account, to remove consumer
// k, created at created, which passed its inactive_threshold here.
func (c *Cluster) askRemoveInactive(k consumerKey, created time.Time) {
	body, _ := json.Marshal(assignmentDeleteMsg{Account: k.account, Stream: k.stream, Consumer: k.name, Created: created})
	if !c.publishSystem(assignmentDelete, "", body) {
		c.cfg.Logf("jscluster: consumer %s > %s > %s is inactive, but there is no system account to ask its removal through", k.account, k.stream, k.name)
	}
}

// onAssignmentDelete, on the meta leader, proposes the removal of an
// inactive consumer whose assignment is the one the request names (its
// created time), apart from the publisher's goroutine (nats-server
// v2.15.2 processConsumerAssignmentDelete).
func (c *Cluster) onAssignmentDelete(_, _ string, _, data []byte) {
	var m assignmentDeleteMsg
	if err := json.Unmarshal(data, &m); err != nil || m.Consumer == "" || !c.metaLeader() {
		return
	}
	k := consumerKey{m.Account, m.Stream, m.Consumer}
	ca, _, assigned, _ := c.consumerAssignment(k)
	if !assigned || ca.Created != m.Created.UnixNano() {
		return
	}
	go func() {
		if _, jerr := c.propose(&meta.RemoveConsumer{Account: k.account, Stream: k.stream, Name: k.name}); jerr != nil {
			if d := c.cfg.Debugf; d != nil {
				d("jscluster: remove inactive consumer %s > %s > %s: %v", k.account, k.stream, k.name, jerr)
			}
			return
		}
		c.mu.Lock()
		acc := c.accounts[k.account]
		c.mu.Unlock()
		if acc != nil && acc.js != nil {
			acc.js.AdviseConsumer(k.stream, k.name, false)
		}
	}()
}
