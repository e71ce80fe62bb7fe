package jsapi

import "github.com/cairnmq/cairn/internal/jserr"

// typePrefix starts every response type (the API response types (ADR-1)).
const typePrefix = "io.nats.jetstream.api.v1."

// apiResponse is the head of every response: "type" first, then "error"
// on failure (nats-server ApiResponse).
type apiResponse struct {
	Type  string       `json:"type"`
	Error *jserr.Error `json:"error,omitempty"`

	// errorIsResult marks an error that nats-server v2.15.2 sends as the
	// outcome of the operation (through sendAPIResponse), so api.errors
	// does not count it: MSG.DELETE of a missing sequence, a failed purge.
	errorIsResult bool

	// after, when set, runs once the response was sent (or would have
	// been, without a reply subject): a snapshot streams its chunks only
	// after the answer that names what it streams.
	after func()
}

func (r *apiResponse) base() *apiResponse { return r }

// response is a response value: a struct that embeds apiResponse first.
type response interface {
	base() *apiResponse
}

// apiPaged are the paging keys of a list response (the API paging (ADR-1)). They have no omitempty: nats-server v2.15.2 writes them even on
// errors, as "total":0,"offset":0,"limit":0.
type apiPaged struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Limit  int `json:"limit"`
}

// Page sizes (nats-server JSApiNamesLimit, JSApiListLimit,
// JSMaxSubjectDetails).
const (
	namesLimit        = 1024
	listLimit         = 256
	subjectsInfoLimit = 100_000
)

// page returns the window of n items that starts at offset, with offset
// clamped to n, as nats-server pages names and lists.
func page(n, offset, limit int) (start, end int) {
	start = min(max(offset, 0), n)
	end = min(start+limit, n)
	return start, end
}
