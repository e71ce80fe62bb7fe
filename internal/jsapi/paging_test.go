package jsapi

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cairnmq/cairn/internal/stream"
)

// TestPaging: STREAM.NAMES pages 1024 names and STREAM.LIST 256 infos in
// name order (the API paging (ADR-1)); clients ask again with
// offset += len(page) until they have total.
func TestPaging(t *testing.T) {
	_, js, tr := testAPI(t, Options{})
	const n = namesLimit + 6
	for i := range n {
		name := fmt.Sprintf("S%04d", i)
		if _, err := js.AddStream(stream.Config{Name: name, Storage: stream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, tr)
	names := collect(t, c, "$JS.API.STREAM.NAMES", namesLimit, n)
	infos := collect(t, c, "$JS.API.STREAM.LIST", listLimit, n)
	for i := range n {
		want := fmt.Sprintf("S%04d", i)
		if names[i] != want || infos[i] != want {
			t.Fatalf("item %d: name %s, info %s, want %s", i, names[i], infos[i], want)
		}
	}
}

// collect pages through a names or list endpoint and returns the names.
func collect(t *testing.T, c *client, subj string, limit, total int) []string {
	t.Helper()
	var all []string
	for len(all) < total {
		var resp struct {
			apiPaged
			Streams []json.RawMessage `json:"streams"`
		}
		body := c.request(subj, fmt.Sprintf(`{"offset":%d}`, len(all)), nil)
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Total != total || resp.Offset != len(all) || resp.Limit != limit || len(resp.Streams) != min(limit, total-len(all)) {
			t.Fatalf("%s at %d: total %d offset %d limit %d, %d items", subj, len(all), resp.Total, resp.Offset, resp.Limit, len(resp.Streams))
		}
		for _, raw := range resp.Streams {
			all = append(all, streamName(t, raw))
		}
	}
	return all
}

// streamName reads a names entry ("S0001") or a list entry (an info).
func streamName(t *testing.T, raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return name
	}
	var si struct {
		Config struct {
			Name string `json:"name"`
		} `json:"config"`
	}
	if err := json.Unmarshal(raw, &si); err != nil {
		t.Fatal(err)
	}
	return si.Config.Name
}
