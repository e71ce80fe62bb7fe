package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// The system account's control requests (nats-server v2.15.2 events.go
// initEventTracking and monitor.go): a server answers them only on its
// own id's subject, $SYS.REQ.SERVER.<id>.<X>, in the envelope of the
// other requests (the server, then data or error):
//
//	RELOAD    reload the configuration file, as SIGHUP (`nats server
//	          config reload <id>`); data none, error code 500 with the
//	          reload's error
//	KICK      {"cid":N}: close client connection N, closed reason
//	          "Kicked" (`nats server request kick`)
//	LDM       {"cid":N}: send client N the INFO of a lame duck server
//	          (`nats server request ldm`)
//	PROFILEZ  {"name":"heap","debug":0} or {"name":"cpu","duration":N}
//	          (nanoseconds, at most 15 s): data {"profile": base64,
//	          "error": text}; also on $SYS.REQ.SERVER.PING.PROFILEZ
//	EXPVARZ   data {"memstats": runtime.MemStats, "cmdline": os.Args with
//	          the secrets of --user, --pass, --auth and route URLs
//	          redacted}, also on PING
//
// As in nats-server, a KICK or LDM whose body is not a JSON object with
// a cid gets no answer (nats-server logs it and stays silent), and an
// error of the action itself is answered with code 500 and its text.

// errNoConfigFile is nats-server's answer to RELOAD without a file.
var errNoConfigFile = errors.New("can only reload config when a file is provided using -c or --config")

// cidRequest is the body of KICK and LDM (nats-server KickClientReq,
// LDMClientReq).
type cidRequest struct {
	CID uint64 `json:"cid"`
}

// profilezRequest is the body of PROFILEZ (nats-server ProfilezOptions;
// duration in nanoseconds, as time.Duration encodes).
type profilezRequest struct {
	Name     string        `json:"name"`
	Debug    int           `json:"debug"`
	Duration time.Duration `json:"duration,omitempty"`
	eventFilter
}

// ProfilezStatus is the data of a PROFILEZ answer (nats-server
// ProfilezStatus): the profile in pprof's format, or why there is none.
type ProfilezStatus struct {
	Profile []byte `json:"profile"`
	Error   string `json:"error"`
}

// ExpvarzStatus is the data of an EXPVARZ answer (nats-server
// ExpvarzStatus): what Go's expvar package would publish as memstats and
// cmdline.
type ExpvarzStatus struct {
	Memstats json.RawMessage `json:"memstats"`
	Cmdline  json.RawMessage `json:"cmdline"`
}

// maxCPUProfile is the longest CPU profile PROFILEZ takes (nats-server's
// limit).
const maxCPUProfile = 15 * time.Second

// controlEndpoint returns the request body and answer of a control
// request, as sysEndpoint does for the monitoring ones; nil for an
// unknown kind, a KICK or LDM body that does not decode, and RELOAD,
// KICK and LDM sent to PING rather than to this server's id (direct).
func (m *Monitor) controlEndpoint(kind string, body []byte, direct bool) (any, func(any) (any, error)) {
	switch kind {
	case "RELOAD", "KICK", "LDM":
		if !direct {
			return nil, nil
		}
	}
	switch kind {
	case "RELOAD":
		return &filterOnly{}, func(any) (any, error) { return nil, m.reload() }
	case "KICK", "LDM":
		var q cidRequest
		if json.Unmarshal(body, &q) != nil {
			m.log.Debugf("System request %s: the body is not a client id request", kind)
			return nil, nil
		}
		act := m.srv.KickClient
		if kind == "LDM" {
			act = m.srv.LameDuckClient
		}
		return &filterOnly{}, func(any) (any, error) { return nil, act(q.CID) }
	case "PROFILEZ":
		return &profilezRequest{}, func(r any) (any, error) { return profilez(r.(*profilezRequest)), nil }
	case "EXPVARZ":
		return &filterOnly{}, func(any) (any, error) { return expvarz(), nil }
	}
	return nil, nil
}

// reload runs Options.Reload, logged as a SIGHUP reload is.
func (m *Monitor) reload() error {
	if m.opts.Reload == nil {
		return errNoConfigFile
	}
	m.log.Noticef("Reloading the configuration: requested through the system account")
	return m.opts.Reload()
}

// profilez writes the profile a PROFILEZ asks for, with nats-server's
// error texts.
func profilez(q *profilezRequest) *ProfilezStatus {
	var buf bytes.Buffer
	switch q.Name {
	case "":
		return &ProfilezStatus{Error: "Profile name not specified"}
	case "cpu":
		if q.Duration <= 0 || q.Duration > maxCPUProfile {
			return &ProfilezStatus{Error: fmt.Sprintf("Duration %s should be between 0s and 15s", q.Duration)}
		}
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Failed to start CPU profile: %s", err)}
		}
		time.Sleep(q.Duration) // the profile's length; this request's own goroutine (server sysreq.go)
		pprof.StopCPUProfile()
	default:
		p := pprof.Lookup(q.Name)
		if p == nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q not found", q.Name)}
		}
		if err := p.WriteTo(&buf, q.Debug); err != nil {
			return &ProfilezStatus{Error: fmt.Sprintf("Profile %q error: %s", q.Name, err)}
		}
	}
	return &ProfilezStatus{Profile: buf.Bytes()}
}

// expvarz builds what expvar's memstats and cmdline variables hold,
// without importing expvar (which would register /debug/vars on
// http.DefaultServeMux), the command line with its secrets redacted.
func expvarz() *ExpvarzStatus {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mem, _ := json.Marshal(&ms)
	cmd, _ := json.Marshal(redactArgs(os.Args))
	return &ExpvarzStatus{Memstats: mem, Cmdline: cmd}
}

// Flags whose values redactArgs hides: credentials, and route URLs whose
// user part may hold them.
var (
	secretArg  = regexp.MustCompile("^-{1,2}(user|pass|auth)(=.*)?$")
	routesArg  = regexp.MustCompile("^-{1,2}(routes)(=.*)?$")
	clusterArg = regexp.MustCompile("^-{1,2}(cluster|cluster_listen)(=.*)?$")
)

// redactArgs returns a copy of args with the values of --user, --pass
// and --auth replaced by "[REDACTED]" and the user part of the URLs of
// --routes, --cluster and --cluster_listen by "[REDACTED]" (nats-server
// v2.15.2 RedactArgs, its fix of CVE-2026-33247: credentials given as
// flags were readable through /debug/vars and EXPVARZ). "-f=v" and
// "-f v" are both handled.
func redactArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case secretArg.MatchString(a):
			redactValue(out, i, func(string) string { return "[REDACTED]" })
		case routesArg.MatchString(a):
			redactValue(out, i, func(v string) string {
				parts := strings.Split(v, ",")
				for j, p := range parts {
					parts[j] = redactURLUser(p)
				}
				return strings.Join(parts, ",")
			})
		case clusterArg.MatchString(a):
			redactValue(out, i, redactURLUser)
		}
	}
	return out
}

// redactValue applies redact to the value of the flag at args[i].
func redactValue(args []string, i int, redact func(string) string) {
	if flag, v, ok := strings.Cut(args[i], "="); ok {
		args[i] = flag + "=" + redact(v)
	} else if i+1 < len(args) {
		args[i+1] = redact(args[i+1])
	}
}

// redactURLUser hides the user part of a URL: everything before its
// last "@" after the scheme (a URL that does not parse is hidden from
// the scheme on, rather than shown).
func redactURLUser(raw string) string {
	at := strings.LastIndex(raw, "@")
	if at < 0 {
		return raw
	}
	scheme, _, ok := strings.Cut(raw[:at], "://")
	if !ok {
		return "[REDACTED]" + raw[at:]
	}
	return scheme + "://[REDACTED]" + raw[at:]
}
