// Package storetest is the conformance suite every store.Store engine
// runs: Run drives an engine through each method and rule of package
// store and compares the exact states nats-server v2.15.2 reaches
// (docs/protocol.md 3.3 and 6.1-6.3; server/memstore.go and
// server/filestore.go).
//
// Each subtest opens a fresh store with Engine.New. When the engine
// persists (Engine.Reopen is not nil), every subtest that ends with an
// open store also closes and reopens it and checks that State(true),
// SubjectsState, every message and every consumer state it used are
// unchanged; and the Reopen subtests check persistence of specific
// shapes explicitly.
//
// Call it from the engine's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Engine{Name: "memstore", New: newStore})
//	}
package storetest

import (
	"testing"

	"github.com/cairnmq/cairn/internal/store"
)

// Engine describes a store engine under test.
type Engine struct {
	// Name names the engine in failure messages.
	Name string
	// New opens a store on a fresh location with cfg.
	New func(t *testing.T, cfg store.Config) store.Store
	// Reopen closes s and opens the same location again with cfg. It is nil
	// for engines without persistence.
	Reopen func(t *testing.T, s store.Store, cfg store.Config) store.Store
	// MemSizes says the engine counts bytes as a memory store does
	// (store.MemMsgSize, store.Config.MemSizes).
	MemSizes bool
}

// test is one subtest of the suite.
type test struct {
	name string
	fn   func(t *testing.T, e Engine)
	// reopen marks tests that only make sense for persistent engines.
	reopen bool
}

// Run runs the whole suite against e.
func Run(t *testing.T, e Engine) {
	var all []test
	all = append(all, basicTests...)
	all = append(all, loadTests...)
	all = append(all, removeTests...)
	all = append(all, purgeTests...)
	all = append(all, limitTests...)
	all = append(all, configTests...)
	all = append(all, consumerTests...)
	all = append(all, miscTests...)
	all = append(all, pendingTests...)
	all = append(all, reopenTests...)
	all = append(all, skipTests...)
	all = append(all, ttlTests...)
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			if tc.reopen && e.Reopen == nil {
				t.Skipf("%s does not persist", e.Name)
			}
			tc.fn(t, e)
		})
	}
}
