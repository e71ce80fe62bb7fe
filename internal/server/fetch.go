package server

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// Fetching an account JWT from the other servers, and the full
// resolvers' comparison of their directories (nats-server v2.15.2
// accounts.go Server.fetch, DirAccResolver.Start's pack handling).
//
// A client presenting a user JWT of an account the server does not know
// has the account looked up before it is authenticated, on its own read
// loop (as nats-server does, on the client's goroutine): the server
// publishes $SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP with a reply inbox of its
// own and waits, at most the resolver's timeout (1.9 s), for a JWT. The
// full resolvers of the cluster (this one included) answer, with the JWT
// or an empty message; empty answers are waited out until every server
// expected (the routes, and this server when full) answered. A JWT
// received is checked (decodes, names the account, issued by a trusted
// key), stored in the directory when newer (saveIfNewer) and applied as
// a change of the account JWTs; then the client is authenticated against
// the new directory. Lookups of the same account share one request; at
// most maxFetches run at once, beyond which a client is refused at once.
//
// Every interval a full resolver publishes $SYS.REQ.CLAIMS.PACK with the
// hash of its directory; each other full resolver answers, when its hash
// differs, with its JWTs ("<key>|<jwt>" lines) and an empty message. The
// trusted JWTs newer than the stored ones are stored and applied.
// (nats-server subscribes the queue group "responder", so that one server
// answers; in cairn the member on the requesting server would be chosen
// every time, so every other server answers: a cluster of n full
// resolvers that differ sends n-1 packs per interval.)

// maxFetches bounds the lookups in flight (each holds a client's read
// loop for up to the timeout).
const maxFetches = 64

// errFetchTimeout and errFetchNotFound are the outcomes of a lookup no
// server answered in time, or every server answered empty (nats-server's
// texts).
var (
	errFetchTimeout  = errors.New("fetching jwt timed out")
	errFetchNotFound = errors.New("account jwt not found")
	errFetchBusy     = errors.New("too many account lookups in flight")
)

// fetchCall is one lookup, shared by the clients waiting for it.
type fetchCall struct {
	done chan struct{}
	err  error
}

// packInbox is the subject the pack answers to this server's requests
// arrive on.
func (r *resolver) packInbox() string { return "$SYS._INBOX." + r.s.id + ".pack" }

// fetchFor fetches the account of a user JWT when the server does not
// know it; it returns nil when the account is known or was fetched.
func (r *resolver) fetchFor(userJWT string) error {
	acc := auth.JWTAccount(userJWT)
	if acc == "" || !nkeys.IsValidPublicAccountKey(acc) {
		return nil // the authentication refuses it
	}
	if _, ok := r.known(acc); ok {
		return nil
	}
	return r.fetch(acc)
}

// fetch looks up acc from the other servers (see the comment at the top
// of this file), sharing a lookup in flight.
func (r *resolver) fetch(acc string) error {
	r.fmu.Lock()
	if c := r.fetches[acc]; c != nil {
		r.fmu.Unlock()
		<-c.done
		return c.err
	}
	if len(r.fetches) >= maxFetches {
		r.fmu.Unlock()
		return errFetchBusy
	}
	c := &fetchCall{done: make(chan struct{})}
	r.fetches[acc] = c
	r.nextIn++
	inbox := fmt.Sprintf("$SYS._INBOX.%s.L%d", r.s.id, r.nextIn)
	r.fmu.Unlock()
	c.err = r.lookupRemote(acc, inbox)
	r.fmu.Lock()
	delete(r.fetches, acc)
	r.fmu.Unlock()
	close(c.done)
	if c.err != nil {
		r.s.log.Warnf("Account fetch failed: %v", c.err)
	}
	return c.err
}

// lookupRemote sends the lookup of acc and waits for its answer.
func (r *resolver) lookupRemote(acc, inbox string) error {
	s := r.s
	expected := s.NumRoutes()
	if r.cfg.Full {
		expected++ // this server answers too
	}
	answers := make(chan []byte, 1)
	var mu sync.Mutex
	handler := func(_, _ string, _, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		expected--
		if len(data) == 0 && expected > 0 {
			return // wait for the others
		}
		select {
		case answers <- append([]byte(nil), data...):
		default:
		}
	}
	sub, err := s.subscribeIn(s.sysacc, inbox, "", handler, subKindSystem)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	subj := "$SYS.REQ.ACCOUNT." + acc + ".CLAIMS.LOOKUP"
	s.publishIn(s.sysacc, subj, subj, inbox, nil, nil, pubNormal)
	timer := time.NewTimer(r.cfg.FetchTimeout())
	defer timer.Stop()
	select {
	case <-s.quit:
		return errors.New("fetching jwt failed due to shutdown")
	case <-timer.C:
		return errFetchTimeout
	case tok := <-answers:
		if len(tok) == 0 {
			return errFetchNotFound
		}
		return r.storeFetched(acc, string(tok))
	}
}

// storeFetched checks a JWT another server sent for acc, stores it when
// newer than the stored one and applies it.
func (r *resolver) storeFetched(acc, tok string) error {
	if err := r.trusted(acc, tok); err != nil {
		return err
	}
	changed, err := r.store.SaveIfNewer(acc, tok)
	if err != nil {
		return err
	}
	if !changed {
		if _, known := r.known(acc); known {
			return nil
		}
		if tok, err = r.store.Load(acc); err != nil {
			return err
		}
	}
	r.s.applyAccountJWTs(accountChange{stored: map[string]string{acc: tok}})
	return nil
}

// syncLoop asks the other full resolvers every interval for the JWTs this
// one lacks, until shutdown.
func (r *resolver) syncLoop() {
	tick := time.NewTicker(r.cfg.SyncInterval())
	defer tick.Stop()
	for {
		select {
		case <-r.s.quit:
			return
		case <-tick.C:
			h := r.store.Hash()
			r.s.log.Debugf("DirResolver - Checking store state: %x", h)
			r.s.publishIn(r.s.sysacc, claimsPackSubj, claimsPackSubj, r.packInbox(), nil, h[:], pubNormal)
		}
	}
}

// pack answers a pack request: an empty message when the requester's hash
// is this directory's, else its JWTs and then an empty message.
func (r *resolver) pack(theirHash []byte, reply string) {
	if reply == "" || reply == r.packInbox() {
		return
	}
	s := r.s
	if r.store.HashEqual(theirHash) {
		s.publishIn(s.sysacc, reply, reply, "", nil, nil, pubNormal)
		return
	}
	err := r.store.Pack(1, func(p string) { s.publishIn(s.sysacc, reply, reply, "", nil, []byte(p), pubNormal) })
	if err != nil {
		s.log.Errorf("DirResolver - Pack request error: %v", err)
		return // the requester's merge waits for the next interval
	}
	s.publishIn(s.sysacc, reply, reply, "", nil, nil, pubNormal)
}

// merge is the handler of the pack answers: it runs on the publisher's
// goroutine, so it hands the pack to the resolver's goroutine.
func (r *resolver) merge(_, _ string, _, data []byte) {
	if len(data) == 0 {
		return // the end of an answer
	}
	select {
	case r.q <- sysRequest{subject: "$merge", body: append([]byte(nil), data...)}:
	default:
	}
}

// mergePack stores the JWTs of a pack that are trusted and newer than
// the ones stored (nats-server DirJWTStore.Merge, which stores untrusted
// ones too), and applies them.
func (r *resolver) mergePack(pack []byte) {
	ch := accountChange{stored: map[string]string{}}
	for _, line := range strings.Split(string(pack), "\n") {
		key, tok, ok := strings.Cut(line, "|")
		if line == "" {
			continue
		}
		if !ok || r.trusted(key, tok) != nil {
			r.s.log.Errorf("DirResolver - Merging resulted in error: line of %d bytes is no trusted account JWT", len(line))
			continue
		}
		changed, err := r.store.SaveIfNewer(key, tok)
		if err != nil {
			r.s.log.Errorf("DirResolver - Merging resulted in error: %v", err)
			continue
		}
		if changed {
			ch.stored[key] = tok
		}
	}
	r.s.applyAccountJWTs(ch)
}

// trusted checks that tok is an account JWT of acc issued by a trusted
// key (errUntrustedJWT otherwise, or the decoding error).
func (r *resolver) trusted(acc, tok string) error {
	ac, err := jwt.DecodeAccountClaims(tok)
	if err != nil {
		return err
	}
	if ac.Subject != acc || !nkeys.IsValidPublicAccountKey(acc) || !r.s.security().operator.TrustedKeys()[ac.Issuer] {
		return errUntrustedJWT
	}
	return nil
}
