package server

import "testing"

// TestTakeAPIClient: a routed API request loses the header that carries
// its client's description, which is kept for the delivery; other
// headers and other subjects are left as they are, and a message with
// no header left goes on without a header block.
func TestTakeAPIClient(t *testing.T) {
	const ci = `{"id":3,"acc":"$G"}`
	for _, tc := range []struct {
		subj, msg   string
		hdrLen      int
		wantMsg, ci string
		wantHdrLen  int
	}{
		{"$JS.API.INFO", "NATS/1.0\r\nCairn-Api-Client: " + ci + "\r\n\r\n{}", 51, "{}", ci, -1},
		{"$JS.API.INFO", "NATS/1.0\r\nA: b\r\nCairn-Api-Client: " + ci + "\r\n\r\n{}", 57, "NATS/1.0\r\nA: b\r\n\r\n{}", ci, 18},
		{"$JS.API.INFO", "NATS/1.0\r\nA: b\r\n\r\n{}", 18, "NATS/1.0\r\nA: b\r\n\r\n{}", "", 18},
		{"orders.new", "NATS/1.0\r\nCairn-Api-Client: " + ci + "\r\n\r\n{}", 51, "NATS/1.0\r\nCairn-Api-Client: " + ci + "\r\n\r\n{}", "", 51},
		{"$JS.API.INFO", "{}", -1, "{}", "", -1},
	} {
		c := &client{apiClient: []byte("stale")}
		n, msg := c.takeAPIClient([]byte(tc.subj), tc.hdrLen, []byte(tc.msg))
		if n != tc.wantHdrLen || string(msg) != tc.wantMsg || string(c.apiClient) != tc.ci {
			t.Errorf("%s %q: got %d %q client %q", tc.subj, tc.msg, n, msg, c.apiClient)
		}
	}
}
