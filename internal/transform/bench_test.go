package transform

import "testing"

// BenchmarkMap measures Map on the publish path: a wildcard swap, a
// partition, and a subject that does not match.
func BenchmarkMap(b *testing.B) {
	for _, c := range []struct{ name, src, dest, subject string }{
		{"swap", "orders.*.*", "orders.$2.$1", "orders.eu.c42"},
		{"partition", "orders.*.>", "{{partition(16,1)}}.orders.$1.>", "orders.eu.c42.new"},
		{"nomatch", "orders.*.*", "orders.$2.$1", "invoices.eu.c42"},
	} {
		tr, err := New(c.src, c.dest)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.Map(c.subject)
			}
		})
	}
}
