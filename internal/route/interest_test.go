package route

import "testing"

// TestInterest follows one plain subject and one queue group through
// their counts: a plain subject is announced at its first subscription and
// withdrawn at its last; a queue group is announced with its weight at every
// change (nats-server v2.15.2 updateRouteSubscriptionMap).
func TestInterest(t *testing.T) {
	in := NewInterest("$G")
	steps := []struct {
		add          bool
		subj, queue  string
		want         string
		wantInterest int
	}{
		{true, "foo", "", "RS+ $G foo\r\n", 1},
		{true, "foo", "", "", 1},
		{true, "foo", "q", "RS+ $G foo q 1\r\n", 2},
		{true, "foo", "q", "RS+ $G foo q 2\r\n", 2},
		{false, "foo", "", "", 2},
		{false, "foo", "q", "RS+ $G foo q 1\r\n", 2},
		{false, "foo", "", "RS- $G foo\r\n", 1},
		{false, "foo", "", "", 1}, // never added: nothing
		{false, "foo", "q", "RS- $G foo q\r\n", 0},
	}
	for i, s := range steps {
		var got []byte
		if s.add {
			got = in.Add(nil, s.subj, s.queue)
		} else {
			got = in.Remove(nil, s.subj, s.queue)
		}
		if string(got) != s.want || in.Len() != s.wantInterest {
			t.Fatalf("step %d: got %q (len %d), want %q (len %d)", i, got, in.Len(), s.want, s.wantInterest)
		}
	}
}

func TestInterestAppendAll(t *testing.T) {
	in := NewInterest("$G")
	in.Add(nil, "b", "")
	in.Add(nil, "a", "q")
	in.Add(nil, "a", "q")
	in.Add(nil, "a", "")
	in.Add(nil, "b", "")
	want := "RS+ $G a\r\nRS+ $G a q 2\r\nRS+ $G b\r\n"
	if got := string(in.AppendAll(nil)); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
