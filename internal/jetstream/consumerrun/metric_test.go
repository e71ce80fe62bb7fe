package consumerrun

import "testing"

// TestSampled: sample_freq is read as nats-server v2.15.2 reads it (a
// number with an optional "%"), and an ack is sampled when the draw in
// [0, 100) is at most the frequency: never at 0, always from 100 on.
func TestSampled(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
	}{{"", 0}, {"30", 30}, {"30%", 30}, {"0%", 0}, {"100", 100}, {"250%", 250}, {"x", 0}, {"-5", 0}, {"3000000000", 0}} {
		if got := parseSampleFreq(tc.in); got != tc.want {
			t.Errorf("parseSampleFreq(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		freq, draw int32
		want       bool
	}{
		{0, 0, false}, {30, 0, true}, {30, 30, true}, {30, 31, false}, {30, 99, false},
		{99, 99, true}, {100, 99, true}, {250, 99, true}, {-1, 0, false},
	} {
		drew := false
		got := sampled(tc.freq, func(n int32) int32 {
			if n != 100 {
				t.Fatalf("draw(%d)", n)
			}
			drew = true
			return tc.draw
		})
		if got != tc.want {
			t.Errorf("sampled(%d) with draw %d = %v", tc.freq, tc.draw, got)
		}
		if drew != (tc.freq > 0 && tc.freq < 100) {
			t.Errorf("sampled(%d) drew: %v", tc.freq, drew)
		}
	}
}
