package monitor

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cairnmq/cairn/internal/config"
	"github.com/cairnmq/cairn/internal/server"
	"golang.org/x/crypto/bcrypt"
)

// authGet sends a request with the given method and Authorization header
// ("" for none) and returns the status, the WWW-Authenticate values and
// the body.
func authGet(t *testing.T, method, u, authz string) (int, []string, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Values("WWW-Authenticate"), string(b)
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

// With http_auth, every endpoint answers 401 with WWW-Authenticate
// without valid credentials, and serves the request with the user and
// password (basic) or the token (bearer), plain or bcrypt; /healthz is
// open with healthz_no_auth; a CORS preflight passes; /varz shows no
// secret; SetAuth swaps the credentials (a reload) or removes them.
func TestHTTPAuth(t *testing.T) {
	const pass, token = "pw-81d2", "tok-5e0a"
	hash, err := bcrypt.GenerateFromPassword([]byte(token), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Host: "127.0.0.1", Port: server.RandomPort, Server: s,
		Auth: config.MonitorAuth{User: "mon", Password: pass, Token: string(hash)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); s.Shutdown() })
	u := m.URL()

	for _, path := range []string{"/", "/varz", "/connz", "/healthz", "/jsz", "/accountz", "/metrics", "/stacksz", "/nope"} {
		for _, authz := range []string{"", basic("mon", "wrong"), basic("other", pass), "Bearer wrong", "Bearer " + string(hash), "Basic !!", "Token " + token} {
			code, challenges, body := authGet(t, http.MethodGet, u+path, authz)
			if code != http.StatusUnauthorized || len(challenges) != 2 ||
				!strings.HasPrefix(challenges[0], `Basic realm="cairn monitoring"`) || challenges[1] != `Bearer realm="cairn monitoring"` ||
				strings.Contains(body, "server_id") || strings.Contains(body, pass) {
				t.Errorf("%s with %q: %d %v %q, want 401 with both challenges and no data", path, authz, code, challenges, body)
			}
		}
		for _, authz := range []string{basic("mon", pass), "Bearer " + token, "bearer " + token} {
			if code, _, body := authGet(t, http.MethodGet, u+path, authz); code == http.StatusUnauthorized {
				t.Errorf("%s with %q: 401 %s", path, authz, body)
			}
		}
	}
	_, _, varz := authGet(t, http.MethodGet, u+"/varz", basic("mon", pass))
	if !strings.Contains(varz, `"server_id"`) || strings.Contains(varz, pass) || strings.Contains(varz, token) || strings.Contains(varz, string(hash)) {
		t.Errorf("/varz: %s", varz)
	}
	if code, _, _ := authGet(t, http.MethodOptions, u+"/varz", ""); code != http.StatusNoContent {
		t.Errorf("CORS preflight: %d, want 204", code)
	}

	m.SetAuth(config.MonitorAuth{Token: "new", HealthzNoAuth: true})
	if code, challenges, _ := authGet(t, http.MethodGet, u+"/varz", basic("mon", pass)); code != http.StatusUnauthorized || len(challenges) != 1 {
		t.Errorf("old credentials after SetAuth: %d %v", code, challenges)
	}
	if code, _, _ := authGet(t, http.MethodGet, u+"/varz", "Bearer new"); code != http.StatusOK {
		t.Errorf("new token: %d", code)
	}
	if code, _, body := authGet(t, http.MethodGet, u+"/healthz", ""); code != http.StatusOK || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz with healthz_no_auth: %d %s", code, body)
	}
	m.SetAuth(config.MonitorAuth{})
	if code, _, _ := authGet(t, http.MethodGet, u+"/varz", ""); code != http.StatusOK {
		t.Errorf("without http_auth: %d", code)
	}
}
