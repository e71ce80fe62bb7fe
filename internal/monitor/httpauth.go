package monitor

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"

	"github.com/cairnmq/cairn/internal/auth"
	"github.com/cairnmq/cairn/internal/config"
)

// Authentication of the monitoring endpoints (docs/monitoring.md,
// "Authentication"; cairn's own http_auth block, since nats-server
// v2.15.2's monitoring has none and its maintainers declined one):
//
//   - with a user and password, a request passes with HTTP basic
//     authentication (RFC 7617) naming them; with a token, with
//     "Authorization: Bearer <token>" (RFC 6750). Each secret is compared
//     in constant time, or with bcrypt when it is configured as a bcrypt
//     hash, as clients' passwords are (auth.ComparePassword).
//   - any other request gets 401, a WWW-Authenticate header for each
//     scheme configured (realm "cairn monitoring") and no data; /healthz
//     is answered without credentials when healthz_no_auth is set, for
//     probes that send none.
//   - a browser's CORS preflight (OPTIONS) is answered without
//     credentials, allowing the Authorization header, so that browser
//     dashboards can send them.
//
// The check runs inside the bound on requests in flight, so a flood of
// wrong guesses at a bcrypt secret costs at most maxInFlight bcrypt
// comparisons at once. A presented secret that matched a bcrypt hash is
// remembered (its SHA-256, up to authCacheMax of them), so a scraper
// pays for bcrypt once, not at every scrape.

// authRealm names the protected space in WWW-Authenticate.
const authRealm = "cairn monitoring"

// authCacheMax bounds the remembered secrets that matched a bcrypt hash;
// beyond it the memory is cleared and starts again.
const authCacheMax = 64

// httpAuth is the authentication in force; replaced whole by SetAuth.
type httpAuth struct {
	cfg config.MonitorAuth

	mu   sync.Mutex
	good map[[sha256.Size]byte]struct{} // SHA-256 of hash and secret that matched; guarded by mu
}

func newHTTPAuth(cfg config.MonitorAuth) *httpAuth {
	return &httpAuth{cfg: cfg, good: map[[sha256.Size]byte]struct{}{}}
}

// allows reports whether the request carries valid credentials.
func (a *httpAuth) allows(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok {
		if a.cfg.User == "" {
			return false
		}
		userOK := subtle.ConstantTimeCompare([]byte(user), []byte(a.cfg.User)) == 1
		return a.secretOK(a.cfg.Password, pass) && userOK
	}
	h := r.Header.Get("Authorization")
	if len(h) > len("Bearer ") && strings.EqualFold(h[:len("Bearer ")], "Bearer ") && a.cfg.Token != "" {
		return a.secretOK(a.cfg.Token, strings.TrimSpace(h[len("Bearer "):]))
	}
	return false
}

// secretOK compares a presented secret with the configured one.
func (a *httpAuth) secretOK(configured, given string) bool {
	if !auth.IsBcrypt(configured) {
		return auth.ComparePassword(configured, given)
	}
	key := sha256.Sum256([]byte(configured + "\x00" + given))
	a.mu.Lock()
	_, known := a.good[key]
	a.mu.Unlock()
	if known {
		return true
	}
	if !auth.ComparePassword(configured, given) {
		return false
	}
	a.mu.Lock()
	if len(a.good) >= authCacheMax {
		clear(a.good)
	}
	a.good[key] = struct{}{}
	a.mu.Unlock()
	return true
}

// challenge answers a request without valid credentials: 401 with the
// schemes the configuration accepts.
func (a *httpAuth) challenge(w http.ResponseWriter) {
	if a.cfg.User != "" {
		w.Header().Add("WWW-Authenticate", `Basic realm="`+authRealm+`", charset="UTF-8"`)
	}
	if a.cfg.Token != "" {
		w.Header().Add("WWW-Authenticate", `Bearer realm="`+authRealm+`"`)
	}
	writeText(w, http.StatusUnauthorized, "Unauthorized: the monitoring endpoints require credentials")
}

// preflight answers a browser's CORS preflight request.
func preflight(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	w.Header().Set("Access-Control-Allow-Headers", "Authorization")
	w.WriteHeader(http.StatusNoContent)
}

// SetAuth replaces the monitoring endpoints' authentication (a reload of
// http_auth); the zero MonitorAuth requires none. Requests being served
// finish under the previous one.
func (m *Monitor) SetAuth(a config.MonitorAuth) {
	if !a.Enabled() {
		m.auth.Store(nil)
		return
	}
	m.auth.Store(newHTTPAuth(a))
}

// authorize checks a request against the authentication in force; it
// answers the request itself (401, or the CORS preflight) and returns
// false when the handler must not run.
func (m *Monitor) authorize(path string, w http.ResponseWriter, r *http.Request) bool {
	a := m.auth.Load()
	switch {
	case a == nil:
		return true
	case r.Method == http.MethodOptions:
		preflight(w)
		return false
	case path == HealthzPath && a.cfg.HealthzNoAuth:
		return true
	case a.allows(r):
		return true
	}
	m.log.Debugf("Monitoring request for %s from %s refused: no valid credentials", r.URL.Path, r.RemoteAddr)
	a.challenge(w)
	return false
}
