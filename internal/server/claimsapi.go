package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// The claims API of the nats-based resolvers (docs/security.md, "The
// nats-based resolvers"; nats-server v2.15.2 accounts.go
// DirAccResolver.Start, CacheDirAccResolver.Start, respondToUpdate,
// handleListRequest, handleDeleteRequest). The resolver subscribes, in the
// system account (so only its users, and the other servers, reach them):
//
//	$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE  a JWT of <acc> to store (full, cache)
//	$SYS.ACCOUNT.<acc>.CLAIMS.UPDATE      the same, the older subject (full, cache)
//	$SYS.REQ.CLAIMS.UPDATE                a JWT to store (full, cache)
//	$SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP  the JWT of <acc>, empty when unknown (full)
//	$SYS.REQ.CLAIMS.LIST                  the account keys stored (full, cache)
//	$SYS.REQ.CLAIMS.DELETE                an operator-signed list of accounts to delete (full with allow_delete, cache)
//	$SYS.REQ.CLAIMS.PACK                  the JWTs, when the requester's hash differs (full; fetch.go)
//
// An update or delete is answered with nats-server's JSON:
//
//	{"server":{...},"data":{"account":"A...","code":200,"message":"jwt updated"}}
//	{"server":{...},"error":{"account":"A...","code":500,"description":"jwt update resulted in error - <why>"}}
//
// a list with {"data":["A...",...],"server":{...}}, a lookup with the JWT
// itself (or an empty message), a pack with messages of "<key>|<jwt>"
// lines ended by an empty message. In a cluster every server subscribes,
// so a push reaches (and is answered by) every server.
//
// The subscriptions' handlers copy the request into a bounded queue
// (claimsQueue requests of at most the server's max_payload) and the
// resolver's goroutine answers them in order; a request that finds the
// queue full is dropped (its requester times out).

// claimsQueue is how many claims requests may wait.
const claimsQueue = 64

// Claims subjects (nats-server events.go).
const (
	claimsUpdateSubj    = "$SYS.REQ.CLAIMS.UPDATE"
	claimsListSubj      = "$SYS.REQ.CLAIMS.LIST"
	claimsDeleteSubj    = "$SYS.REQ.CLAIMS.DELETE"
	claimsPackSubj      = "$SYS.REQ.CLAIMS.PACK"
	accClaimsUpdateSubj = "$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE"
	accClaimsUpdateOld  = "$SYS.ACCOUNT.*.CLAIMS.UPDATE"
	accClaimsLookupSubj = "$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP"
)

// SysServerInfo identifies the answering server in the claims API's
// replies (nats-server ServerInfo; the monitor's $SYS replies carry the
// same fields).
type SysServerInfo struct {
	Name    string `json:"name"`
	Host    string `json:"host"`
	ID      string `json:"id"`
	Cluster string `json:"cluster,omitempty"`
	Version string `json:"ver"`
	// Tags: Options.Tags (server_tags).
	Tags []string `json:"tags,omitempty"`
	// FeatureFlags: FeatureFlags().
	FeatureFlags map[string]bool `json:"feature_flags,omitempty"`
	JetStream    bool            `json:"jetstream"`
	// Flags: 1 with JetStream, as the monitor's $SYS replies
	// (nats-server's ServerCapability JetStreamEnabled alone).
	Flags uint64    `json:"flags"`
	Seq   uint64    `json:"seq"`
	Time  time.Time `json:"time"`
}

var claimsSeq atomic.Uint64

// sysServerInfo is this server's SysServerInfo.
func (s *Server) sysServerInfo() *SysServerInfo {
	si := &SysServerInfo{Name: s.opts.ServerName, Host: s.opts.Host, ID: s.id, Version: NATSVersion,
		Tags: s.opts.Tags, FeatureFlags: FeatureFlags(), JetStream: s.opts.JetStream, Seq: claimsSeq.Add(1), Time: time.Now().UTC()}
	if s.cl != nil {
		si.Cluster = s.ClusterName()
	}
	if si.JetStream {
		si.Flags = 1
	}
	return si
}

// claimUpdateResponse is nats-server's ServerAPIClaimUpdateResponse.
type claimUpdateResponse struct {
	Server *SysServerInfo `json:"server"`
	Data   *claimStatus   `json:"data,omitempty"`
	Error  *claimError    `json:"error,omitempty"`
}

type claimStatus struct {
	Account string `json:"account,omitempty"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

type claimError struct {
	Account     string `json:"account,omitempty"`
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// startClaimsAPI subscribes the resolver's subjects and starts its
// goroutines (the requests, the expiry and, for a full resolver, the
// periodic comparison with the other servers).
func (r *resolver) startClaimsAPI() error {
	s := r.s
	sys := s.sysacc
	if sys == nil {
		return fmt.Errorf("%w: a nats-based resolver needs a system account", ErrInvalidOptions)
	}
	r.q = make(chan sysRequest, claimsQueue)
	if r.store == nil {
		return r.startMemory()
	}
	subjects := []string{accClaimsUpdateSubj, accClaimsUpdateOld, claimsUpdateSubj, claimsListSubj, claimsDeleteSubj}
	if r.cfg.Full {
		subjects = append(subjects, accClaimsLookupSubj)
	}
	for _, subj := range subjects {
		if _, err := s.subscribeIn(sys, subj, "", r.enqueue, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to %s: %w", subj, err)
		}
	}
	if r.cfg.Full {
		// Every full resolver answers (nats-server: the queue group
		// "responder", whose member on the requesting server would
		// answer its own requests), but not its own requests.
		if _, err := s.subscribeIn(sys, claimsPackSubj, "", r.enqueue, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to %s: %w", claimsPackSubj, err)
		}
		if _, err := s.subscribeIn(sys, r.packInbox(), "", r.merge, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to the pack inbox: %w", err)
		}
	}
	if !s.goroutine(r.serve) || !s.goroutine(r.expireLoop) {
		return errShuttingDown
	}
	if r.cfg.Full && !s.goroutine(r.syncLoop) {
		return errShuttingDown
	}
	kind := "some"
	if r.cfg.Full {
		kind = "all"
	}
	s.log.Noticef("Managing %s jwt in exclusive directory %s", kind, r.store.Dir())
	return nil
}

// enqueue is the handler of the claims subscriptions: it runs on the
// publisher's goroutine and only copies the request into the queue.
func (r *resolver) enqueue(subj, reply string, _, data []byte) {
	if len(data) > int(r.s.limits().MaxPayload) {
		return
	}
	select {
	case r.q <- sysRequest{subject: subj, reply: reply, body: append([]byte(nil), data...)}:
	default:
		r.s.log.Debugf("Resolver - request queue full (%d): dropped a request on %s", claimsQueue, subj)
	}
}

// serve answers the queued claims requests until shutdown.
func (r *resolver) serve() {
	for {
		select {
		case <-r.s.quit:
			return
		case q := <-r.q:
			r.handle(q)
		}
	}
}

// handle answers one claims request.
func (r *resolver) handle(q sysRequest) {
	tk := strings.Split(q.subject, ".")
	switch {
	case r.store == nil:
		r.memoryUpdate(q.subject, q.body, q.reply)
	case q.subject == "$merge":
		r.mergePack(q.body)
	case q.subject == claimsUpdateSubj:
		r.update("", q.body, q.reply)
	case len(tk) == 6 && tk[2] == "ACCOUNT" && tk[5] == "UPDATE", len(tk) == 5 && tk[1] == "ACCOUNT":
		acc := tk[2]
		if len(tk) == 6 {
			acc = tk[3]
		}
		r.update(acc, q.body, q.reply)
	case len(tk) == 6 && tk[5] == "LOOKUP":
		r.lookup(tk[3], q.reply)
	case q.subject == claimsListSubj:
		r.list(q.reply)
	case q.subject == claimsDeleteSubj:
		r.deleteRequest(q.body, q.reply)
	case q.subject == claimsPackSubj:
		r.pack(q.body, q.reply)
	}
}

// respond logs the outcome of an update or delete and answers it as
// nats-server respondToUpdate: acc "" leaves the account out.
func (r *resolver) respond(reply, acc, message string, err error) {
	s := r.s
	resp := claimUpdateResponse{Server: s.sysServerInfo()}
	switch {
	case err == nil && acc == "":
		s.log.Debugf("%s", message)
	case err == nil:
		s.log.Debugf("%s - %s", message, acc)
	case acc == "":
		s.log.Errorf("%s - %s", message, err)
	default:
		s.log.Errorf("%s - %s - %s", message, acc, err)
	}
	if err == nil {
		resp.Data = &claimStatus{Account: acc, Code: http.StatusOK, Message: message}
	} else {
		resp.Error = &claimError{Account: acc, Code: http.StatusInternalServerError, Description: fmt.Sprintf("%s - %v", message, err)}
	}
	r.reply(reply, resp)
}

// reply publishes v, as JSON, to reply in the system account; nothing
// without a reply subject.
func (r *resolver) reply(reply string, v any) {
	if reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	r.s.publishIn(r.s.sysacc, reply, reply, "", nil, b, pubNormal)
}

// update stores a pushed JWT: of the account acc named by the subject,
// or ("") of the JWT's subject. The texts are nats-server's, full and
// cache apart; cairn also refuses a JWT not issued by a trusted key and a
// JWT issued before the stored one (checkPushed).
func (r *resolver) update(acc string, body []byte, reply string) {
	prefix := "jwt update"
	if !r.cfg.Full {
		prefix = "jwt update cache"
	}
	failed := prefix + " resulted in error"
	ac, err := jwt.DecodeAccountClaims(string(body))
	if err != nil {
		who := "n/a"
		if acc != "" && !r.cfg.Full {
			who = acc
		}
		r.respond(reply, who, failed, err)
		return
	}
	if acc == "" {
		acc = ac.Subject
	}
	validation := "jwt validation failed"
	if !r.cfg.Full {
		validation = "jwt update cache validation failed"
	}
	_, known := r.known(acc)
	switch {
	case r.cfg.Full && claimValidate(ac) != nil: // a full resolver validates first
		r.respond(reply, acc, validation, claimValidate(ac))
	case ac.Subject != acc:
		r.respond(reply, acc, failed, errors.New("subject does not match jwt content"))
	case r.s.strictIssuer(ac):
		r.respond(reply, acc, failed, errors.New("operator requires issuer to be a signing key"))
	case !r.cfg.Full && !known:
		r.respond(reply, acc, "jwt update cache skipped", nil)
	case claimValidate(ac) != nil:
		r.respond(reply, acc, validation, claimValidate(ac))
	default:
		if err := r.s.checkPushed(ac); err != nil {
			r.respond(reply, acc, failed, err)
			return
		}
		changed, err := r.store.Save(acc, string(body))
		if err != nil {
			r.respond(reply, acc, failed, err)
			return
		}
		if changed {
			r.s.applyAccountJWTs(accountChange{stored: map[string]string{acc: string(body)}})
		}
		if r.cfg.Full {
			r.respond(reply, acc, "jwt updated", nil)
		} else {
			r.respond(reply, acc, "jwt updated cache", nil)
		}
	}
}

// known reports whether acc is an account of the directory in force, and
// returns its JWT.
func (r *resolver) known(acc string) (string, bool) {
	r.s.secMu.Lock()
	defer r.s.secMu.Unlock()
	tok, ok := r.jwts[acc]
	return tok, ok
}

// lookup answers a lookup with the stored JWT of acc, or an empty
// message when there is none; nothing for a key that is not an nkey
// (nats-server logs that error and stays silent).
func (r *resolver) lookup(acc, reply string) {
	if reply == "" {
		return
	}
	tok, err := r.store.Load(acc)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.s.log.Debugf("DirResolver - Could not find account %q", acc)
		r.s.publishIn(r.s.sysacc, reply, reply, "", nil, nil, pubNormal)
	case err != nil:
		r.s.log.Errorf("DirResolver - Error looking up account %q: %v", acc, err)
	default:
		r.s.publishIn(r.s.sysacc, reply, reply, "", nil, []byte(tok), pubNormal)
	}
}

// list answers a list request with the stored account keys.
func (r *resolver) list(reply string) {
	if reply == "" {
		return
	}
	keys := r.store.Keys()
	r.s.log.Debugf("list request responded with %d account ids", len(keys))
	r.reply(reply, map[string]any{"server": r.s.sysServerInfo(), "data": keys})
}

// deleteRequest deletes the accounts of an operator-signed request: a
// generic JWT, self-signed by the operator or one of its signing keys,
// whose data lists "accounts" (nats-server handleDeleteRequest, with its
// texts). The system account may not be deleted.
func (r *resolver) deleteRequest(body []byte, reply string) {
	var accs []any
	var subj string
	gk, err := jwt.DecodeGeneric(string(body))
	if err == nil {
		subj = gk.Subject
		list, hasList := gk.Data["accounts"]
		switch {
		case r.cfg.Full && !r.cfg.AllowDelete:
			err = errors.New("delete must be enabled in server config")
		case subj != gk.Issuer:
			err = errors.New("not self signed")
		case !r.operatorKeys()[gk.Issuer]:
			err = errors.New("not trusted")
		case !hasList:
			err = errors.New("malformed request")
		default:
			var ok bool
			if accs, ok = list.([]any); !ok {
				err = errors.New("malformed request")
			}
			for _, e := range accs {
				if a, ok := e.(string); !ok || !nkeys.IsValidPublicAccountKey(a) {
					err = errors.New("malformed request")
					break
				} else if a == r.s.SystemAccount() {
					err = errors.New("not allowed to delete system account")
					break
				}
			}
		}
	}
	if err != nil {
		r.respond(reply, "", fmt.Sprintf("delete accounts request by %s failed", subj), err)
		return
	}
	var errs []string
	var deleted []string
	for _, e := range accs {
		a := e.(string)
		if err := r.store.Delete(a); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		deleted = append(deleted, a)
	}
	r.s.applyAccountJWTs(accountChange{deleted: deleted})
	if len(errs) == 0 {
		r.respond(reply, "", fmt.Sprintf("deleted %d accounts", len(deleted)), nil)
		return
	}
	r.respond(reply, "", fmt.Sprintf("deleted %d accounts, failed for %d", len(deleted), len(errs)), errors.New(strings.Join(errs, "\n")))
}

// operatorKeys are the keys that may sign a delete request: the first
// operator's signing keys and, unless it requires them, its own
// (nats-server getOperatorKeys).
func (r *resolver) operatorKeys() map[string]bool {
	out := map[string]bool{}
	op := r.s.security().operator
	if len(op.JWTs) == 0 {
		return out
	}
	oc, err := jwt.DecodeOperatorClaims(op.JWTs[0])
	if err != nil {
		return out
	}
	if !oc.StrictSigningKeyUsage {
		out[oc.Subject] = true
	}
	for _, k := range oc.SigningKeys {
		out[k] = true
	}
	return out
}
