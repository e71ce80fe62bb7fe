package server

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/jwt/v2"
)

// Pushes to the MEMORY resolver (nats-server v2.15.2 events.go
// accountClaimUpdate): with resolver: MEMORY the server subscribes, in
// the system account, $SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE and the older
// $SYS.ACCOUNT.<acc>.CLAIMS.UPDATE (not $SYS.REQ.CLAIMS.UPDATE), and a JWT
// pushed there replaces the JWT of a preloaded account in memory, applied
// as the full resolver's changes are (resolver.go). A JWT of an account
// that is not preloaded is skipped; the next reload puts the preloaded
// JWTs back. Answers and texts are nats-server's: "jwt updated", "jwt
// update skipped", "jwt update error - request body is empty", "jwt
// update resulted in error - <why>" (a JWT that is not issued by a
// trusted key, or expired: "account validation failed").

// startMemory subscribes the MEMORY resolver's update subjects and starts
// its goroutine.
func (r *resolver) startMemory() error {
	s := r.s
	for _, subj := range []string{accClaimsUpdateSubj, accClaimsUpdateOld} {
		if _, err := s.subscribeIn(s.sysacc, subj, "", r.enqueue, subKindSystem); err != nil {
			return fmt.Errorf("server: subscribe to %s: %w", subj, err)
		}
	}
	if !s.goroutine(r.serve) {
		return errShuttingDown
	}
	return nil
}

// memoryUpdate answers a push to the MEMORY resolver.
func (r *resolver) memoryUpdate(subject string, body []byte, reply string) {
	tk := strings.Split(subject, ".")
	var acc string
	switch len(tk) {
	case 6:
		acc = tk[3]
	case 5:
		acc = tk[2]
	default:
		return
	}
	if len(body) == 0 {
		r.respond(reply, acc, "jwt update error", errors.New("request body is empty"))
		return
	}
	ac, err := jwt.DecodeAccountClaims(string(body))
	switch {
	case err != nil:
		r.respond(reply, acc, "jwt update resulted in error", err)
		return
	case ac.Subject != acc:
		r.respond(reply, acc, "jwt update resulted in error", errors.New("subject does not match jwt content"))
		return
	}
	old, known := r.known(acc)
	switch {
	case !known:
		r.respond(reply, acc, "jwt update skipped", nil)
		return
	case old == string(body):
		r.respond(reply, acc, "jwt updated", nil)
		return
	}
	vr := jwt.CreateValidationResults()
	ac.Validate(vr)
	if !r.s.security().operator.TrustedKeys()[ac.Issuer] || vr.IsBlocking(true) {
		r.respond(reply, acc, "jwt update resulted in error", errUntrustedJWT)
		return
	}
	r.s.applyAccountJWTs(accountChange{stored: map[string]string{acc: string(body)}})
	r.respond(reply, acc, "jwt updated", nil)
}
