package jsapi

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// testVersion is the server version the test engine advertises.
const testVersion = "2.10.0"

// knownDifferences turn nats-server v2.15.2's responses in
// testdata/golden.txt into cairn's: cairn advertises API level 4 and here
// advertises version 2.10.0, where that server has level 5 and 2.15.2.
var knownDifferences = strings.NewReplacer(
	`"_nats.level":"5"`, `"_nats.level":"4"`,
	`"_nats.ver":"2.15.2"`, `"_nats.ver":"`+testVersion+`"`,
	`"api":{"level":5,`, `"api":{"level":4,`,
)

var timestamp = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"`)

// normalize replaces every non-zero timestamp with "<time>"; the zero time
// "0001-01-01T00:00:00Z" stays, since it tells an empty stream.
func normalize(s string) string {
	return timestamp.ReplaceAllStringFunc(s, func(ts string) string {
		if strings.HasPrefix(ts, `"0001-`) {
			return ts
		}
		return `"<time>"`
	})
}

// TestGolden replays testdata/golden.txt: requests and publishes recorded
// against nats-server v2.15.2 (nats-server -js -n n1, file storage), each
// followed by that server's response on a "<" line. cairn must answer the
// same bytes, timestamps aside and after knownDifferences; where cairn
// knowingly differs, a "=" line after the "<" line gives cairn's answer and
// a comment says why. The file covers every endpoint, its errors in
// nats-server's order, paging and the API statistics of the final
// $JS.API.INFO.
func TestGolden(t *testing.T) {
	_, _, tr := testAPI(t, Options{})
	c := newClient(t, tr)
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	var hdr []byte
	var cur exchange
	for n := 1; sc.Scan(); n++ {
		verb, rest, _ := strings.Cut(sc.Text(), " ")
		switch verb {
		case "hdr":
			hdr = header(rest)
		case "req", "pub":
			cur.check(t)
			subj, body, _ := strings.Cut(rest, " ")
			cur = exchange{line: n, sent: sc.Text(), got: c.request(subj, body, hdr)}
			hdr = nil
		case "<":
			cur.want = normalize(knownDifferences.Replace(rest))
		case "=":
			cur.want = normalize(rest)
		}
	}
	cur.check(t)
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// exchange is one request of the golden file and its two answers.
type exchange struct {
	line            int
	sent, got, want string
}

func (e exchange) check(t *testing.T) {
	t.Helper()
	if e.sent == "" {
		return
	}
	if g := normalize(e.got); g != e.want {
		t.Errorf("golden.txt:%d: %s\n got: %s\nwant: %s", e.line, e.sent, g, e.want)
	}
}
