package jscluster

import (
	"encoding/json"
	"time"
)

// Requests from a server to the meta leader (lost.go, scaledown.go) share
// one shape: the server publishes a JSON body in the system account with
// no reply and repeats it while it still needs it; the meta leader alone
// acts on it, apart from the publisher's goroutine; repeats are spaced
// per subject of the request (retryMemo). The meta leader's own repeated
// proposals (membership.go replaceStale) are spaced the same way.

// askMeta publishes v, as JSON, on subj in the system account for the
// meta leader; false without a system account.
func (c *Cluster) askMeta(subj string, v any) bool {
	body, err := json.Marshal(v)
	return err == nil && c.publishSystem(subj, "", body)
}

// metaRequest decodes the body of a request to the meta leader into v:
// false when it does not decode or this server does not lead the meta
// group (the request is then dropped; its sender repeats it).
func (c *Cluster) metaRequest(data []byte, v any) bool {
	return decodeJSON(data, v) && c.metaLeader()
}

// decodeJSON reports whether data decodes into v.
func decodeJSON(data []byte, v any) bool {
	return json.Unmarshal(data, v) == nil
}

// retryMemo remembers when something was last done per replica of a
// stream, to do it again at most every so often. The zero value is
// ready; its owner guards it.
type retryMemo map[staleKey]time.Time

// due reports whether key's last time is at least every before now (or
// it has none), and if so records now.
func (m *retryMemo) due(key staleKey, now time.Time, every time.Duration) bool {
	if t, ok := (*m)[key]; ok && now.Sub(t) < every {
		return false
	}
	if *m == nil {
		*m = retryMemo{}
	}
	(*m)[key] = now
	return true
}
