package subject

import "testing"

func BenchmarkValidSubjectBytes(b *testing.B) {
	s := []byte("$JS.API.CONSUMER.CREATE.ORDERS.worker.orders.*.>")
	b.ReportAllocs()
	for b.Loop() {
		ValidSubjectBytes(s)
	}
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Match("orders.eu.c2.t3", "orders.*.c2.>")
	}
}

func BenchmarkOverlap(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Overlap("orders.*.c2.>", "orders.eu.*.t3")
	}
}
