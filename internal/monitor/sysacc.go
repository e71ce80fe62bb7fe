package monitor

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cairnmq/cairn/internal/config"
)

// The account-scoped requests of the system account (nats-server v2.15.2
// events.go initEventTracking, monAccSrvc and userInfoReq;
// docs/monitoring.md): $SYS.REQ.ACCOUNT.<acc>.<X> answers about one
// account, $SYS.REQ.USER.<acc>.INFO about the requester. Other accounts
// reach them through the imports the server gives them
// (internal/server sysreq.go).

// UserInfo is the reply data of $SYS.REQ.USER.INFO (nats-server v2.15.2
// events.go UserInfo): who asked, in which account, the user JWT's name,
// the user's permissions (left out when it has none) and, for a JWT that
// expires, the time left in nanoseconds, truncated to the second.
type UserInfo struct {
	UserID      string           `json:"user"`
	Account     string           `json:"account"`
	AccountName string           `json:"account_name,omitempty"`
	UserName    string           `json:"user_name,omitempty"`
	Permissions *UserPermissions `json:"permissions,omitempty"`
	Expires     time.Duration    `json:"expires,omitempty"`
}

// UserPermissions are a user's permissions as $SYS.REQ.USER.INFO shows
// them (nats-server auth.go Permissions): publish and subscribe always,
// each with its allow and deny lists when not empty; responses
// (allow_responses: max replies per request, ttl in nanoseconds) when
// set.
type UserPermissions struct {
	Publish   *SubjectPermission  `json:"publish"`
	Subscribe *SubjectPermission  `json:"subscribe"`
	Response  *ResponsePermission `json:"responses,omitempty"`
}

// SubjectPermission is an allow list and a deny list of subjects
// (subscribe entries may end with a queue group after a space).
type SubjectPermission struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// ResponsePermission is allow_responses: replies per received request
// (max) and for how long (ttl, nanoseconds).
type ResponsePermission struct {
	MaxMsgs int           `json:"max"`
	Expires time.Duration `json:"ttl"`
}

// userPermissions converts the server's listing; nil for nil.
func userPermissions(p *config.Permissions) *UserPermissions {
	if p == nil {
		return nil
	}
	sp := func(s *config.SubjectPermission) *SubjectPermission {
		if s == nil {
			return &SubjectPermission{}
		}
		return &SubjectPermission{Allow: s.Allow, Deny: s.Deny}
	}
	out := &UserPermissions{Publish: sp(p.Publish), Subscribe: sp(p.Subscribe)}
	if r := p.Response; r != nil {
		out.Response = &ResponsePermission{MaxMsgs: r.MaxMsgs, Expires: r.Expires}
	}
	return out
}

// accountRequest answers $SYS.REQ.ACCOUNT.<acc>.<kind> with body.
func (m *Monitor) accountRequest(acc, kind string, body []byte) ([]byte, bool) {
	if acc == "PING" && kind != "CONNZ" && kind != "STATZ" {
		return nil, false
	}
	if kind == "CONNS" {
		conns := 0
		for _, a := range m.srv.Accounts() {
			if a.Name == acc {
				conns = a.Connections
			}
		}
		return sysEvents{m}.AccountConns(acc, conns), true
	}
	var req any
	var build func() (any, error)
	switch kind {
	case "CONNZ":
		q := &connzRequest{}
		req, build = q, func() (any, error) {
			o := q.options()
			o.acc = acc
			return m.connz(o)
		}
	case "SUBSZ":
		q := &subszRequest{}
		// The list always (nats-server sets Subscriptions for this request).
		req, build = q, func() (any, error) { return m.subsz(true, q.Offset, q.Limit, q.Test, acc), nil }
	case "JSZ":
		q := &jszRequest{}
		req, build = q, func() (any, error) {
			o := q.options()
			o.acc, o.accounts = acc, true
			js := m.jsz(o)
			for _, d := range js.AccountDetails {
				if d.Name == acc {
					return d, nil
				}
			}
			return &AccountDetail{Name: acc, ID: acc}, nil
		}
	case "INFO":
		q := &filterOnly{}
		req, build = q, func() (any, error) {
			az, err := m.accountz(acc)
			if err != nil {
				return nil, err
			}
			return az.Account, nil
		}
	case "LEAFZ":
		q := &filterOnly{}
		req, build = q, func() (any, error) {
			return &Leafz{ID: m.srv.ID(), Now: time.Now().UTC(), Leafs: []struct{}{}}, nil
		}
	case "STATZ":
		q := &struct {
			IncludeUnused bool `json:"include_unused,omitempty"`
			eventFilter
		}{}
		req, build = q, func() (any, error) {
			az := &AccountStatz{ID: m.srv.ID(), Now: time.Now().UTC(), Accounts: []*AccountStat{}}
			for _, a := range m.srv.Accounts() {
				if a.Name == acc && (a.Connections > 0 || q.IncludeUnused) {
					az.Accounts = append(az.Accounts, &AccountStat{
						Account: a.Name, Name: a.Name, Conns: a.Connections, TotalConns: a.Connections,
						NumSubs: uint32(a.Sublist.NumSubs),
						Sent:    dataStats(a.OutMsgs, a.OutBytes, 0, 0), Received: dataStats(a.InMsgs, a.InBytes, 0, 0),
					})
				}
			}
			if len(az.Accounts) == 0 {
				return nil, errSkip // nats-server errSkipZreq: stay silent
			}
			return az, nil
		}
	default:
		return nil, false
	}
	resp := &serverAPIResponse{Server: m.serverInfo()}
	if len(body) > 0 {
		if err := json.Unmarshal(body, req); err != nil {
			resp.Error = &APIError{Code: http.StatusBadRequest, Description: err.Error()}
			return marshalReply(resp)
		}
		if !m.matches(accFilterOf(req)) {
			return nil, false
		}
	}
	data, err := build()
	switch {
	case errors.Is(err, errSkip):
		return nil, false
	case err != nil:
		resp.Error = &APIError{Code: http.StatusInternalServerError, Description: err.Error()}
	default:
		resp.Data = data
	}
	return marshalReply(resp)
}

func (e *APIError) Error() string { return e.Description }

// accFilterOf returns the filter of an account request's body.
func accFilterOf(req any) *eventFilter {
	if f, ok := req.(interface{ filter() *eventFilter }); ok {
		return f.filter()
	}
	return filterOf(req)
}

func (f *eventFilter) filter() *eventFilter { return f }

// userInfo answers $SYS.REQ.USER.<acc>.INFO; info is the requester's
// Nats-Request-Info ({"id":..,"acc":..,"user":..}): its connection id
// finds the user's permissions and expiry (nats-server userInfoReq reads
// them from the requesting connection).
func (m *Monitor) userInfo(info []byte) ([]byte, bool) {
	resp := &serverAPIResponse{Server: m.serverInfo()}
	var ci struct {
		ID      uint64 `json:"id"`
		Account string `json:"acc"`
		User    string `json:"user"`
	}
	if err := json.Unmarshal(info, &ci); err != nil || ci.Account == "" {
		resp.Error = &APIError{Code: http.StatusBadRequest}
		return marshalReply(resp)
	}
	ui := &UserInfo{UserID: ci.User, Account: ci.Account, AccountName: ci.Account}
	if d, ok := m.srv.ClientUser(ci.ID); ok {
		ui.UserName, ui.Permissions = d.NameTag, userPermissions(d.Permissions)
		if !d.Expires.IsZero() {
			ui.Expires = max(time.Until(d.Expires).Truncate(time.Second), 0)
		}
	}
	resp.Data = ui
	return marshalReply(resp)
}

// sysAccountSubject splits $SYS.REQ.ACCOUNT.<acc>.<kind>; ok false for
// another subject.
func sysAccountSubject(subject string) (acc, kind string, ok bool) {
	rest, found := strings.CutPrefix(subject, "$SYS.REQ.ACCOUNT.")
	if !found {
		return "", "", false
	}
	acc, kind, ok = strings.Cut(rest, ".")
	return acc, kind, ok && !strings.Contains(kind, ".")
}
