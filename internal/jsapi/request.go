package jsapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cairnmq/cairn/internal/jserr"
)

// request is one API request, copied off the publisher's read loop, with
// the tokens the route found in its subject.
type request struct {
	subject string
	reply   string
	hdr     []byte // the header block, nil when none
	data    []byte // the body

	key      string // the endpoint key, such as "STREAM.INFO"
	stream   string // the stream name token, "" when the endpoint has none
	consumer string // the consumer name token, "" when none
	filter   string // CONSUMER.CREATE.<S>.<C>.<filter...>
	tokens   int    // tokens after the endpoint key

	audit  bool   // something listened for the audit advisory when it arrived (audit.go)
	client []byte // then, and for a snapshot or restore: the requester's ClientInfo JSON, nil when unknown

	held    time.Time // when it was first held for a later answer (later.go); zero if never
	delayed bool      // its offline answer was delayed once (later.go)
}

// newRequest copies a message delivered to the API subscription.
func newRequest(subject, reply string, hdr, data []byte) *request {
	buf := make([]byte, len(hdr)+len(data))
	copy(buf, hdr)
	copy(buf[len(hdr):], data)
	r := &request{subject: subject, reply: reply, data: buf[len(hdr):]}
	if len(hdr) > 0 {
		r.hdr = buf[:len(hdr):len(hdr)]
	}
	return r
}

// requiredLevelHeader asks for a minimum JetStream API level.
const requiredLevelHeader = "Nats-Required-Api-Level"

// checkLevel returns 10185 when the request's Nats-Required-Api-Level is
// above APILevel or is not a number (nats-server errorOnRequiredApiLevel:
// strconv.Atoi of the value).
func (r *request) checkLevel() *jserr.Error {
	v, ok := headerValue(r.hdr, requiredLevelHeader)
	if !ok || v == "" {
		return nil
	}
	if n, err := strconv.Atoi(v); err != nil || n > APILevel {
		return jserr.New(jserr.RequiredApiLevel)
	}
	return nil
}

// headerValue returns the value of the first header named exactly key, as
// nats-server's sliceHeader finds it: the name (case-sensitive) must start
// a line and be followed by ':'; spaces before the value are skipped and
// the value runs to the CRLF.
func headerValue(hdr []byte, key string) (string, bool) {
	for off := 0; ; {
		i := bytes.Index(hdr[off:], []byte(key))
		if i < 0 {
			return "", false
		}
		i += off
		end := i + len(key)
		if i >= 2 && hdr[i-2] == '\r' && hdr[i-1] == '\n' && end < len(hdr) && hdr[end] == ':' {
			v := bytes.TrimLeft(hdr[end+1:], " ")
			if j := bytes.Index(v, []byte("\r\n")); j >= 0 {
				v = v[:j]
			}
			return string(v), true
		}
		off = end
	}
}

// isJSONObjectOrArray reports whether the body, after JSON whitespace,
// starts with '{' or '['. Endpoints with optional input decode the body
// only then and ignore anything else (nats-server isJSONObjectOrArray).
func isJSONObjectOrArray(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\n\r")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// isEmptyRequest reports whether the body is empty, "{}", or a JSON
// object without keys (nats-server isEmptyRequest). Whitespace alone is
// not empty: nats-server v2.15.2 answers 10038 to it on STREAM.DELETE.
func isEmptyRequest(b []byte) bool {
	if len(b) == 0 || string(b) == "{}" {
		return true
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return false
	}
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// decode decodes every JSON value in b into v in turn, as nats-server's
// unmarshalRequest does (so `{"name":"A"}{"name":"B"}` leaves name B),
// but ignoring unknown keys. An empty body decodes to nothing. A failure
// is 10025 "invalid JSON: <detail>" with nats-server's detail: the
// encoding/json text, plus " at offset N" for syntax errors.
func decode(b []byte, v any) *jserr.Error {
	d := json.NewDecoder(bytes.NewReader(b))
	for {
		err := d.Decode(v)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return invalidJSON(err)
		}
	}
}

// invalidJSON is error 10025 for a decoding error.
func invalidJSON(err error) *jserr.Error {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		err = fmt.Errorf("%w at offset %d", err, se.Offset)
	}
	return jserr.New(jserr.InvalidJSON, jserr.Sub("err", err))
}
