package monitor

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/cairnmq/cairn/internal/jetstream"
	"github.com/cairnmq/cairn/internal/server"
)

// healthzOptions are /healthz's query options (nats-server
// HealthzOptions).
type healthzOptions struct {
	jsEnabledOnly bool // js-enabled-only, or the deprecated js-enabled
	jsServerOnly  bool
	jsMetaOnly    bool
	account       string
	stream        string
	consumer      string
	details       bool
}

// handleHealthz serves /healthz (nats-server v2.15.2 monitor.go healthz)
// for every account with JetStream (or the one account names), stricter
// than nats-server: besides a stream that could not be restored, it reports not ok with the reason when a stream's store is
// fenced after a write error, when a store found damaged data, and when
// the disk guard refuses publishes (docs/monitoring.md). The status code
// goes in the HTTP status, not in the body.
func (m *Monitor) handleHealthz(w http.ResponseWriter, r *http.Request) {
	q := &query{r: r}
	o := healthzOptions{
		jsEnabledOnly: q.boolean("js-enabled") || q.boolean("js-enabled-only"),
		jsServerOnly:  q.boolean("js-server-only"),
		jsMetaOnly:    q.boolean("js-meta-only"),
		details:       q.boolean("details"),
		account:       q.str("account"),
		stream:        q.str("stream"),
		consumer:      q.str("consumer"),
	}
	if q.bad(w) {
		return
	}
	hs := m.healthz(o)
	code := hs.StatusCode
	hs.StatusCode = 0
	b, _ := jsonCompact(hs)
	writeBody(w, code, b)
}

// health builds the answer of /healthz.
type health struct {
	st      HealthStatus
	details bool
}

// fail records a problem: the first one as error (without details), every
// one in errors (with details).
func (h *health) fail(typ, account, stream, consumer, msg string) {
	if h.details {
		h.st.Errors = append(h.st.Errors, HealthError{Type: typ, Account: account, Stream: stream, Consumer: consumer, Error: msg})
		return
	}
	if h.st.Error == "" {
		h.st.Error = msg
	}
}

func (h *health) failed() bool { return h.st.Error != "" || len(h.st.Errors) > 0 }

// finish sets the status and the code nats-server sets: with details,
// "error" or "ok"; without, status is what the check set ("unavailable"
// or "error") and the code 503 on failure unless set.
func (h *health) finish(status string, code int) *HealthStatus {
	if h.failed() {
		h.st.Status = status
		if h.details {
			h.st.Status = "error"
		}
		h.st.StatusCode = code
	} else {
		h.st.Status, h.st.StatusCode = "ok", http.StatusOK
	}
	return &h.st
}

func (m *Monitor) healthz(o healthzOptions) *HealthStatus {
	h := &health{details: o.details}
	const unavailable = "unavailable"
	switch {
	case o.account == "" && o.stream != "":
		h.fail("BAD_REQUEST", "", "", "", fmt.Sprintf("%q must not be empty when checking stream health", "account"))
		return h.finish("error", http.StatusBadRequest)
	case o.stream == "" && o.consumer != "":
		h.fail("BAD_REQUEST", "", "", "", fmt.Sprintf("%q must not be empty when checking consumer health", "stream"))
		return h.finish("error", http.StatusBadRequest)
	}
	if err := m.srv.Ready(); err != nil {
		h.fail("CONNECTION", "", "", "", err.Error())
		return h.finish("error", http.StatusInternalServerError)
	}
	if o.jsServerOnly || !m.srv.Options().JetStream {
		return h.finish("ok", http.StatusOK)
	}
	// JetStream runs once the server is ready: Start fails when it cannot
	// start, and lame duck mode stops it after the server stops being
	// ready. An account without it has nothing to check; with accounts
	// configured and none with JetStream, neither has the server, which
	// nats-server also reports healthy.
	if o.jsEnabledOnly {
		return h.finish("ok", http.StatusOK)
	}
	// In a JetStream cluster: the meta group (all js-meta-only checks),
	// then this server's replicas (healthzcluster.go).
	if done := m.clusterHealth(h, o); done {
		return h.finish(unavailable, http.StatusServiceUnavailable)
	}
	accs := m.jsAccounts()
	if len(accs) == 0 && o.account == "" {
		return h.finish("ok", http.StatusOK)
	}
	if o.account != "" {
		i := slices.IndexFunc(accs, func(a server.AccountStats) bool { return a.Name == o.account })
		if i < 0 {
			h.fail("ACCOUNT", o.account, "", "", fmt.Sprintf("JetStream account %q not found", o.account))
			return h.finish(unavailable, http.StatusNotFound)
		}
		accs = accs[i : i+1]
	}
	js := accs[0].JetStream
	if o.stream != "" && !hasStream(js, o.stream) {
		h.fail("STREAM", o.account, o.stream, "", fmt.Sprintf("JetStream stream %q not found on account %q", o.stream, o.account))
		return h.finish(unavailable, http.StatusNotFound)
	}
	diskSeen := false
	for _, a := range accs {
		for _, p := range a.JetStream.Problems() {
			if p.Kind == "disk" {
				// Every engine watches the same store directory: say it once.
				if diskSeen {
					continue
				}
				diskSeen = true
			} else if o.stream != "" && p.Stream != o.stream {
				continue
			}
			m.reportProblem(h, a.Name, p.Stream, p.Kind, p.Err)
			if !h.details {
				return h.finish(unavailable, http.StatusServiceUnavailable)
			}
		}
	}
	if o.consumer != "" && !h.failed() && !hasConsumer(js, o.stream, o.consumer) {
		h.fail("CONSUMER", o.account, o.stream, o.consumer,
			fmt.Sprintf("JetStream consumer %q not found for stream %q on account %q", o.consumer, o.stream, o.account))
		return h.finish(unavailable, http.StatusNotFound)
	}
	return h.finish(unavailable, http.StatusServiceUnavailable)
}

// reportProblem words a stream's problem: nats-server's texts for a
// stream that was not restored and for a write error, cairn's own for
// damaged data and the disk guard.
func (m *Monitor) reportProblem(h *health, account, stream, kind, why string) {
	switch kind {
	case "recover":
		h.fail("STREAM", account, stream, "", fmt.Sprintf("JetStream stream '%s > %s' could not be recovered", account, stream))
	case "fenced":
		h.fail("STREAM", account, stream, "", fmt.Sprintf("JetStream stream '%s > %s' write error: %s", account, stream, why))
	case "damaged":
		h.fail("STREAM", account, stream, "", fmt.Sprintf("JetStream stream '%s > %s' has damaged data: %s", account, stream, why))
	default:
		h.fail("JETSTREAM", "", "", "", "JetStream refuses publishes: "+why)
	}
}

// hasStream reports whether the account of js has the stream, running or
// found at start and not restored.
func hasStream(js *jetstream.JetStream, name string) bool {
	if slices.Contains(js.Names(""), name) {
		return true
	}
	for _, p := range js.Problems() {
		if p.Stream == name {
			return true
		}
	}
	return false
}

func hasConsumer(js *jetstream.JetStream, stream, name string) bool {
	_, err := js.ConsumerInfo(stream, name)
	return err == nil
}
